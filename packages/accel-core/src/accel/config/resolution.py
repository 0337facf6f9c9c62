"""Resolving the settings of a launch: defaults, config file, pod, environment and flags, layered.

Settings are resolved in layers, each recording where its value came from (:class:`Source`)::

    default  <  config file  <  Kubeflow pod (PET_*, ...)  <  environment (ACCEL_*)  <  flag

The Kubeflow layer (:mod:`accel.config.kubeflow`) is the job description the training
operator or Trainer gives each pod: it outranks a config file (often written for one
machine and baked into the image) and yields to what the user sets explicitly. Then what
follows from the other settings is derived and contradictions are rejected. Torch-free
and yaml-free at import.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accel import catalog
from accel.config.core_options import (
    CORE_SECTION,
    DYNAMO_KEYS,
    DYNAMO_SECTION,
    KEYS,
    MULTI_DEVICE_TYPES,
    PROVIDERS,
)
from accel.config.files import check_sections, find_config_file, load_config_file
from accel.config.kubeflow import JOB_KEYS, MACHINE_KEYS, JobEnvironment, read_job
from accel.config.providers import require_plugin
from accel.errors import ConfigError

# --------------------------------------------------------------------------- provenance


@dataclass(frozen=True)
class Source:
    """Where a resolved value came from."""

    kind: str
    """``default``, ``file``, ``env``, ``flag`` or ``derived``."""
    detail: str = ""
    """The file path, variable name, flag or reason."""

    RANK = {"default": 0, "file": 1, "env": 2, "flag": 3, "derived": 4}

    def __str__(self) -> str:
        if self.kind == "derived" and self.detail:
            return f"derived ({self.detail})"
        return f"{self.kind} {self.detail}".strip()

    @property
    def rank(self) -> int:
        """Precedence of this layer (higher wins)."""
        return self.RANK.get(self.kind, 0)


DEFAULT = Source("default")

# --------------------------------------------------------------------------- layered resolution


@dataclass
class ResolvedConfig:
    """Every setting with its value and where the value came from."""

    values: dict[str, Any]
    sources: dict[str, Source]
    """Source of each key; section entries as ``"section.key"``."""
    config_file: Path | None = None
    config_file_reason: str = ""
    notes: list[str] = field(default_factory=list)
    """Derivations worth telling the user (``distributed_type MULTI_CPU from --cpu``)."""
    job: JobEnvironment | None = None
    """The Kubeflow pod environment the settings read (None outside such a pod)."""

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def get(self, key: str, default: Any = None) -> Any:
        """The value of ``key`` (``"section.key"`` reaches into a section)."""
        if "." in key:
            section, _, sub = key.partition(".")
            return (self.values.get(section) or {}).get(sub, default)
        return self.values.get(key, default)

    def source(self, key: str) -> Source:
        """Where ``key`` came from."""
        return self.sources.get(key, DEFAULT)

    def items(self) -> list[tuple[str, object, Source]]:
        """Every setting, sections flattened to ``section.key``, sorted by name."""
        rows = []
        for name in sorted(self.values):
            value = self.values[name]
            if isinstance(value, dict) and (name.endswith("_config") or name in self.sections()):
                if not value:
                    rows.append((name, {}, self.source(name)))
                for sub in sorted(value):
                    full = f"{name}.{sub}"
                    rows.append((full, value[sub], self.sources.get(full, self.source(name))))
            else:
                rows.append((name, value, self.source(name)))
        return rows

    def sections(self) -> list[str]:
        """Names of the section-valued settings."""
        return [k for k, v in self.values.items() if isinstance(v, dict)]

    def to_file_dict(self) -> dict[str, Any]:
        """The settings a config file may hold (what ``accel config`` writes)."""
        return {
            k: v
            for k, v in self.values.items()
            if (KEYS.get(k) is None or KEYS[k].in_file) and k != "dynamo_backend"
        }

    def to_json(self) -> str:
        """The values as JSON (what workers receive in ``ACCEL_LAUNCH_CONFIG``)."""
        return json.dumps(
            {k: v for k, v in self.values.items() if v is not None}, sort_keys=True, default=str
        )


def resolve(
    flags: Mapping[str, object] | None = None,
    config_file: str | os.PathLike | None = None,
    environ: Mapping[str, str] | None = None,
    use_config_file: bool = True,
    check_plugins: bool = True,
    flag_labels: Mapping[str, str] | None = None,
) -> ResolvedConfig:
    """Merge default < config file < Kubeflow pod < environment < flags, recording sources.

    ``flags`` maps setting names to values given on the command line (None means
    "not given"); ``"section.key"`` names set a key inside a section; ``flag_labels``
    maps a name to the flag the user typed (``use_cpu`` -> ``--cpu``). ``environ``
    defaults to ``os.environ``. Impossible combinations raise ConfigError;
    a plugin-only feature whose plugin is absent raises MissingPluginError.
    """
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    sources: dict[str, Source] = {}
    for key in CORE_SECTION:
        if key.name == "dynamo_backend":
            continue
        values[key.name] = (
            dict(key.default or {}) if key.kind == "section" else copy.copy(key.default)
        )
        sources[key.name] = DEFAULT
    values[DYNAMO_SECTION.key] = DYNAMO_SECTION.defaults()
    for sub in DYNAMO_SECTION.names:
        sources[f"{DYNAMO_SECTION.key}.{sub}"] = DEFAULT

    # file
    path, reason = (None, "not used")
    if use_config_file:
        path, reason = find_config_file(config_file, environ)
        if path is not None:
            data = load_config_file(path, check_plugins=False)
            file_source = Source("file", str(path))
            for name, value in data.items():
                if isinstance(value, dict) and (name not in KEYS or KEYS[name].kind == "section"):
                    merged = dict(values.get(name) or {})
                    merged.update(value)
                    values[name] = merged
                    sources[name] = file_source
                    for sub in value:
                        sources[f"{name}.{sub}"] = file_source
                else:
                    values[name] = value
                    sources[name] = file_source

    job = _apply_job(values, sources, flags or {}, environ, flag_labels)

    # environment
    for section in (CORE_SECTION, DYNAMO_SECTION):
        for key in section:
            if not any(n in environ for n in key.env_names):
                continue
            value = key.from_env(environ)
            name = f"{section.key}.{key.name}" if section.key else key.name
            (values[section.key] if section.key else values)[key.name] = value
            sources[name] = Source("env", next(n for n in key.env_names if n in environ))

    # flags
    for name, value in (flags or {}).items():
        if value is None:
            continue
        label = (flag_labels or {}).get(name) or "--" + name.rpartition(".")[2]
        flag_source = Source("flag", label)
        if "." in name:
            section, _, sub = name.partition(".")
            if section == "dynamo_config" and sub in DYNAMO_KEYS:
                value = DYNAMO_KEYS[sub].convert(value, label)
            values.setdefault(section, {})
            if not isinstance(values[section], dict):
                values[section] = {}
            values[section][sub] = value
            sources[f"{section}.{sub}"] = flag_source
            continue
        key = KEYS.get(name)
        if key is None:
            values[name] = value  # a plugin flag outside any section: kept as given
            sources[name] = flag_source
            continue
        values[name] = key.convert(value, label)
        sources[name] = flag_source

    resolved = ResolvedConfig(values, sources, path, reason, job=job)
    _derive(resolved)
    if check_plugins:
        for name, value in values.items():
            if isinstance(value, dict) and value and name != "dynamo_config":
                kinds = {src.kind for k, src in sources.items() if k.startswith(name + ".")}
                where = [str(path)] if path and ("file" in kinds or not kinds) else []
                if "flag" in kinds:
                    where.append("command line")
                check_sections({name: value}, " + ".join(where) or "<config>")
        _check_plugins(resolved)
    return resolved


def _apply_job(
    values: dict[str, Any],
    sources: dict[str, Source],
    flags: Mapping[str, object],
    environ: Mapping[str, str],
    flag_labels: Mapping[str, str] | None = None,
) -> JobEnvironment | None:
    """The Kubeflow pod layer: what the pod's variables say, less what a higher layer replaces.

    Besides the settings a flag or ``ACCEL_*`` variable replaces one by one, a total
    ``num_processes`` given above drops the pod's processes per machine (the total decides
    them), a ``num_machines`` given above drops the pod's elastic maximum, and
    ``num_machines`` 1 given above drops every multi-machine setting (the pod runs alone).
    The pod's variables behind replaced settings are not read: a flag fixes a bad one.
    """

    def above(name: str) -> object:
        if flags.get(name) is not None:
            return flags[name]
        env_name = KEYS[name].env
        return environ.get(env_name) or None if env_name else None

    use_cpu = above("use_cpu")
    if use_cpu is None:
        use_cpu = values.get("use_cpu")
    else:  # labelled as the flag and environment layers below will label it
        key = KEYS["use_cpu"]
        given = flags.get("use_cpu") is not None
        label = (flag_labels or {}).get("use_cpu", "--use_cpu") if given else None
        use_cpu = key.convert(use_cpu, label or f"environment variable {key.env} ({key.name})")
    skip = {name for name in JOB_KEYS if above(name) is not None}
    if above("num_processes") is not None:
        skip.add("nproc_per_node")
    machines = above("num_machines")
    if machines is not None:
        skip.add("max_num_machines")
        if str(machines).strip() == "1" and flags.get("max_num_machines") is None:
            skip.update(MACHINE_KEYS)
    job = read_job(environ, use_cpu=bool(use_cpu), replaced=skip)
    if job is None:
        return None
    for name, value in job.settings.items():
        values[name] = value
        sources[name] = Source("env", job.origins[name])
    return job


def _where(resolved: ResolvedConfig, key: str) -> str:
    """``key value (source)``, e.g. ``num_processes 3 (file c.yaml)``."""
    source = resolved.source(key)
    value = resolved.values.get(key)
    shown = f"{key} {value}"
    return shown if source.kind == "default" else f"{shown} ({source})"


def _derive(resolved: ResolvedConfig) -> None:
    """Fill in what follows from the other settings and reject contradictions."""
    v, src = resolved.values, resolved.sources
    dtype = v.get("distributed_type")
    machines = v["num_machines"]
    if v["machine_rank"] >= machines:
        raise ConfigError(
            f"{_where(resolved, 'machine_rank')} needs num_machines > {v['machine_rank']} "
            f"but {_where(resolved, 'num_machines')}; ranks go from 0 to num_machines - 1"
        )
    # --cpu against a GPU distributed type: the higher layer wins; two flags contradict, while
    # in one file (or the environment) use_cpu wins, as in Accelerate: a GPU config tried on CPU
    if v["use_cpu"] and dtype in MULTI_DEVICE_TYPES and dtype != "MULTI_CPU":
        s_cpu, s_type = resolved.source("use_cpu"), resolved.source("distributed_type")
        if s_cpu.rank == s_type.rank and s_cpu.kind == "flag":
            raise ConfigError(
                f"{_where(resolved, 'use_cpu')} contradicts "
                f"{_where(resolved, 'distributed_type')}: use --cpu or --multi_gpu, not both"
            )
        if s_cpu.rank == s_type.rank:
            resolved.notes.append(
                f"{_where(resolved, 'distributed_type')} with {_where(resolved, 'use_cpu')}: "
                f"running {v['num_processes']} process(es) on CPU (MULTI_CPU), as Accelerate does"
            )
        if s_cpu.rank >= s_type.rank:
            v["distributed_type"] = dtype = "MULTI_CPU"
            src["distributed_type"] = Source("derived", f"from use_cpu ({s_cpu})")
        else:
            v["use_cpu"] = False
            src["use_cpu"] = Source("derived", f"from distributed_type {dtype} ({s_type})")
    elastic_max = v.get("max_num_machines")
    if elastic_max is not None:
        if elastic_max < machines:
            raise ConfigError(
                f"{_where(resolved, 'max_num_machines')} is below "
                f"{_where(resolved, 'num_machines')}: use MIN:MAX with MIN <= MAX"
            )
        if v["rdzv_backend"] == "static":  # membership may change: needs a dynamic rendezvous
            v["rdzv_backend"] = "c10d"
            src["rdzv_backend"] = Source("derived", "from num_machines MIN:MAX (elastic)")
    nproc = v.get("nproc_per_node")
    total = v["num_processes"]
    if nproc is not None:
        s_num, s_np = resolved.source("num_processes"), resolved.source("nproc_per_node")
        # with c10d a higher num_processes stays the total (machines may differ); a lower one
        # (a config file's, under a Kubeflow pod's processes per machine) is recomputed
        if total != nproc * machines and (v["rdzv_backend"] == "static" or s_np.rank > s_num.rank):
            if s_num.rank >= s_np.rank:
                raise ConfigError(
                    f"nproc_per_node {nproc} on {machines} machine(s) makes {nproc * machines} "
                    f"processes but num_processes is {total} ({s_num}); give only one of them, "
                    "or use rdzv_backend c10d for machines with different process counts"
                )
            v["num_processes"] = total = nproc * machines
            src["num_processes"] = Source("derived", "from nproc_per_node x num_machines")
        # with c10d, machines may run different numbers of processes: num_processes stays the total
    elif machines > 1 and resolved.source("num_processes").kind == "default":
        v["num_processes"] = total = machines
        src["num_processes"] = Source("derived", "one process per machine")
        v["nproc_per_node"] = 1
        src["nproc_per_node"] = Source("derived", "one process per machine")
    elif total % machines != 0:
        raise ConfigError(
            f"{_where(resolved, 'num_processes')} is the total over {machines} machines "
            "and must be divisible by num_machines; or give --nproc_per_node for each machine"
        )
    else:
        v["nproc_per_node"] = total // machines
        src["nproc_per_node"] = Source("derived", "from num_processes / num_machines")
    multi = total > 1 or machines > 1 or (elastic_max or 1) > 1
    if dtype is None:
        if multi:
            if v["use_cpu"]:
                guess = "MULTI_CPU"
                why = "num_processes > 1 with use_cpu"
            else:
                guess = "MULTI_GPU" if _has_cuda_hint() else "MULTI_CPU"
                why = f"num_processes > 1 ({'GPUs visible' if guess == 'MULTI_GPU' else 'no GPU seen'})"
            v["distributed_type"] = guess
            src["distributed_type"] = Source("derived", why)
        else:
            v["distributed_type"] = "NO"
            src["distributed_type"] = Source("derived", "one process")
    elif dtype == "NO" and multi:
        s_type, s_num = resolved.source("distributed_type"), resolved.source("num_processes")
        if s_type.rank >= s_num.rank and max(machines, elastic_max or 1) == 1:
            raise ConfigError(
                f"{_where(resolved, 'distributed_type')} runs one process but "
                f"{_where(resolved, 'num_processes')}; set distributed_type MULTI_CPU or "
                "MULTI_GPU, or num_processes 1"
            )
        guess = "MULTI_CPU" if v["use_cpu"] or not _has_cuda_hint() else "MULTI_GPU"
        v["distributed_type"] = guess
        src["distributed_type"] = Source("derived", f"from num_processes {total} ({s_num})")
    sagemaker = v["compute_environment"] == "AMAZON_SAGEMAKER"  # instances found by SageMaker
    if machines > 1 and not v.get("main_process_ip") and not sagemaker:
        raise ConfigError(
            f"num_machines {machines} needs main_process_ip (the address of machine 0): "
            "pass --main_process_ip or set main_process_ip in the config file"
        )
    # sections whose distributed type is not selected are ignored: say so once
    for section, owner in catalog.SECTION_DISTRIBUTED_TYPE.items():
        if v.get(section) and v["distributed_type"] != owner:
            resolved.notes.append(
                f"{section} is set but distributed_type is {v['distributed_type']}: it is ignored"
            )


def _has_cuda_hint() -> bool:
    """Whether GPUs look present, without importing torch."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return False
    import sys

    torch = sys.modules.get("torch")
    if torch is not None:
        return bool(torch.cuda.is_available())
    return Path("/proc/driver/nvidia/gpus").is_dir() and any(
        Path("/proc/driver/nvidia/gpus").iterdir()
    )


def _check_plugins(resolved: ResolvedConfig) -> None:
    dtype = resolved.values.get("distributed_type")
    if dtype in PROVIDERS:
        require_plugin(dtype, _where(resolved, "distributed_type"))
    if resolved.values.get("mixed_precision") == "fp8":
        require_plugin("fp8", _where(resolved, "mixed_precision"))


__all__ = ["DEFAULT", "ResolvedConfig", "Source", "resolve"]
