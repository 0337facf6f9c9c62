"""The configuration file: Accelerate's ``default_config.yaml`` format, validated and layered.

An Accelerate config file (YAML, or JSON when the name ends in ``.json``) loads
unchanged. Core checks its own keys; each plugin checks the section it owns
(``fsdp_config``, ``deepspeed_config``, ...) through the ``accel_config_sections``
hook. Every error names the file, the key and what is allowed.

Settings are resolved in layers, each recording where its value came from::

    default  <  config file  <  Kubeflow pod (PET_*, ...)  <  environment (ACCEL_*)  <  flag

The Kubeflow layer (:mod:`accel.config.kubeflow`) is the job description the training
operator or Trainer gives each pod: it outranks a config file (often written for one
machine and baked into the image) and yields to what the user sets explicitly.

This module imports neither torch nor yaml at import time: ``accel launch --help``
and bad-input errors stay fast.
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accel import catalog
from accel.config.keys import (  # the declarations live in their own module
    CORE_SECTION,
    DYNAMO_KEYS,
    DYNAMO_SECTION,
    KEYS,
    MULTI_DEVICE_TYPES,
    PROCESS_SECTION,
    PROVIDERS,
    SAGEMAKER_KEYS,
    SECTION_PROVIDERS,
)
from accel.config.kubeflow import JOB_KEYS, MACHINE_KEYS, JobEnvironment, read_job
from accel.config.launched import launched_config
from accel.config.registered import section_validators
from accel.config.sections import Option
from accel.errors import ConfigError, MissingPluginError

CONFIG_FILE_NAME = "default_config.yaml"
"""Name of the default config file inside :func:`default_config_dir`."""

JSON_CONFIG_FILE_NAME = "default_config.json"
"""Name used when only a JSON default config exists (as Accelerate once wrote)."""

# --------------------------------------------------------------------------- locations


def default_config_dir() -> Path:
    """``$ACCEL_CONFIG_DIR``, else ``$HF_HOME/accel``, else ``$XDG_CACHE_HOME/huggingface/accel``,
    else ``~/.cache/huggingface/accel``."""
    explicit = PROCESS_SECTION["config_dir"].from_env()
    if explicit:
        return Path(explicit).expanduser()
    hf_home = os.environ.get("HF_HOME")
    if hf_home:
        return Path(hf_home).expanduser() / "accel"
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg:
        return Path(xdg).expanduser() / "huggingface" / "accel"
    return Path("~/.cache/huggingface/accel").expanduser()


def default_config_file() -> Path:
    """The default config file: ``default_config.yaml`` in :func:`default_config_dir`.

    When only ``default_config.json`` exists there, that file.
    """
    directory = default_config_dir()
    yaml_file = directory / CONFIG_FILE_NAME
    json_file = directory / JSON_CONFIG_FILE_NAME
    if not yaml_file.exists() and json_file.exists():
        return json_file
    return yaml_file


def find_config_file(
    explicit: str | os.PathLike | None = None, environ: Mapping[str, str] | None = None
) -> tuple[Path | None, str]:
    """The config file to use and why: ``(path, reason)``.

    ``explicit`` (``--config_file``) wins, then ``$ACCEL_CONFIG_FILE`` (unset: Accelerate's
    ``$ACCELERATE_CONFIG_FILE``) in ``environ`` (default ``os.environ``), then the default
    file when it exists. ``(None, reason)`` when there is none.
    """
    if explicit:
        return Path(explicit).expanduser(), "flag --config_file"
    option = PROCESS_SECTION["config_file"]
    environ = os.environ if environ is None else environ
    from_env = option.from_env(environ)
    if from_env:
        name = next(n for n in option.env_names if n in environ)
        return Path(from_env).expanduser(), f"env {name}"
    default = default_config_file()
    if default.is_file():
        return default, "default location"
    return None, f"no file at {default}"


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

# --------------------------------------------------------------------------- loading files


def read_config_file(path: str | os.PathLike) -> dict[str, Any]:
    """Parse ``path`` (YAML, or JSON for ``*.json``) into a mapping; no validation of keys."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(
            f"{path}: config file does not exist; create one with `accel config` or fix the path"
        )
    if path.is_dir():
        raise ConfigError(
            f"{path}: is a directory, not a config file; pass the YAML file inside it"
        )
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the config file ({exc})") from None
    if path.suffix.lower() == ".json":
        try:
            data = json.loads(text) if text.strip() else None
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"{path}:{exc.lineno}:{exc.colno}: malformed JSON ({exc.msg}); fix the syntax"
            ) from None
    else:
        import yaml

        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            raise ConfigError(f"{where}: malformed YAML ({problem}); fix the syntax") from None
    if data is None:
        raise ConfigError(
            f"{path}: the config file is empty; write one with `accel config` or `accel config default`"
        )
    if not isinstance(data, dict):
        raise ConfigError(
            f"{path}: the config file must be a mapping of keys to values, not a {type(data).__name__}"
        )
    return data


def validate(data: Mapping[str, Any], origin: str = "<config>") -> dict[str, Any]:
    """Check and normalise a config mapping; ConfigError names ``origin``, the key and the fix.

    Plugin sections are only checked for shape here; :func:`check_sections` runs
    the plugins' validators.
    """
    out: dict[str, Any] = {}
    for name, value in data.items():
        if not isinstance(name, str):
            raise ConfigError(f"{origin}: key {name!r} is not a string; keys are setting names")
        key = KEYS.get(name)
        if key is None and name.endswith("_config") and name in _plugin_section_names():
            key = Option(name, "section", help="a plugin's section", flag=None)  # a third-party's
        if key is None or not key.in_file:
            if key is not None:
                raise ConfigError(
                    f"{origin}: {name}: cannot be set in a config file; pass --{name} to accel launch"
                )
            close = difflib.get_close_matches(name, [k for k in KEYS if KEYS[k].in_file], n=1)
            hint = f"did you mean {close[0]}?" if close else "see `accel config show` for the keys"
            raise ConfigError(f"{origin}: unknown key {name!r}; {hint}")
        value = key.convert(value, f"{origin}: {name}")
        if key.kind == "section":
            value = value or {}
        out[name] = value
    # the old top-level dynamo_backend moves into dynamo_config
    if "dynamo_backend" in out:
        backend = out.pop("dynamo_backend")
        dynamo = dict(out.get("dynamo_config") or {})
        if backend is not None:
            dynamo.setdefault("dynamo_backend", backend)
        out["dynamo_config"] = dynamo
    if out.get("dynamo_config"):
        out["dynamo_config"] = _read_dynamo(out["dynamo_config"], origin)
    if out.get("compute_environment", "LOCAL_MACHINE") != "AMAZON_SAGEMAKER":
        stray = sorted(k for k in out if k in SAGEMAKER_KEYS)
        if stray:
            raise ConfigError(
                f"{origin}: {stray[0]}: only meaningful with compute_environment: AMAZON_SAGEMAKER; "
                "remove it or set compute_environment"
            )
    return out


def _read_dynamo(section: Mapping[str, Any], origin: str) -> dict[str, Any]:
    """``dynamo_config`` checked against :data:`~accel.config.keys.DYNAMO_SECTION`, values typed."""
    problems = DYNAMO_SECTION.validate(section)
    if problems:
        raise ConfigError(_first_problem(origin, DYNAMO_SECTION.key, problems))
    return {
        DYNAMO_SECTION[name].name: DYNAMO_SECTION[name].convert(v) for name, v in section.items()
    }


def _first_problem(origin: str, section: str, problems: list[str]) -> str:
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return f"{origin}: {section}: {problems[0]}{more}"


def load_config_file(path: str | os.PathLike, check_plugins: bool = True) -> dict[str, Any]:
    """Read and validate ``path``: core keys here, plugin sections through their plugins."""
    data = validate(read_config_file(path), str(path))
    if check_plugins:
        check_sections(data, str(path))
    return data


# --------------------------------------------------------------------------- plugins


def _loaded_plugin_distributions() -> set[str]:
    from accel.plugins import list_plugins

    return {info.distribution for info in list_plugins() if info.distribution and not info.error}


def _plugin_error(package: str) -> str | None:
    from accel.plugins import list_plugins

    for info in list_plugins():
        if info.distribution == package and info.error:
            return info.error
    return None


def require_plugin(name: str, feature: str, where: str = "") -> None:
    """Raise MissingPluginError when the package serving ``name`` (a distributed type,
    ``fp8`` or a section key) is not installed and loaded."""
    package = PROVIDERS.get(name) or SECTION_PROVIDERS.get(name)
    if package is None or not package.startswith("accel-"):
        return
    if package in _loaded_plugin_distributions():
        return
    failed = _plugin_error(package)
    extra = f" ({package} is installed but failed to load: {failed})" if failed else ""
    if not failed and installed_but_disabled(package):
        extra = f" ({package} is installed but not loaded: {disabled_by()})"
    prefix = f"{where}: " if where else ""
    raise MissingPluginError(f"{prefix}{feature}", package, extra)


def installed_but_disabled(package: str) -> bool:
    """Whether ``package`` is installed while ``ACCEL_PLUGINS`` / ``ACCEL_DISABLE_PLUGINS`` keep it out."""
    from importlib import metadata

    if disabled_by() is None:
        return False
    try:
        metadata.distribution(package)
    except metadata.PackageNotFoundError:
        return False
    return True


def disabled_by() -> str | None:
    """``ACCEL_PLUGINS=...`` / ``ACCEL_DISABLE_PLUGINS=...`` when either restricts loading."""
    for option in (PROCESS_SECTION["plugins"], PROCESS_SECTION["disable_plugins"]):
        names = option.from_env()
        if names is not None and (option.name == "plugins" or names):
            return f"{option.env}={','.join(names)}"
    return None


def _plugin_section_names() -> set[str]:
    try:
        return set(section_validators())
    except Exception:  # a broken plugin must not hide the real error
        return set()


def check_sections(data: Mapping[str, Any], origin: str = "<config>") -> None:
    """Run the owning plugin's validator on each non-empty plugin section.

    A non-empty section whose plugin is absent is an error naming the package.
    """
    validators = section_validators()
    for name in sorted(data):
        key = KEYS.get(name)
        section = data[name]
        is_section = (key is not None and key.kind == "section") or (
            key is None and isinstance(section, dict) and name in validators
        )
        if not is_section or name == "dynamo_config" or not section:
            continue
        if name == "ipex_config":
            continue  # deprecated and ignored, as in Accelerate
        validator = validators.get(name)
        if validator is None:
            package = SECTION_PROVIDERS.get(name, f"a plugin owning {name!r}")
            if package.startswith("accel-"):
                require_plugin(name, f"the {name} section", origin)
            raise ConfigError(
                f"{origin}: {name}: needs {package}, which is not installed; install it or remove the section"
            )
        try:
            problems = list(validator(dict(section)) or [])
        except Exception as exc:  # a validator must not crash the CLI
            problems = [f"validator failed: {type(exc).__name__}: {exc}"]
        if problems:
            raise ConfigError(_first_problem(origin, name, problems))


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

    def items(self) -> list[tuple[str, Any, Source]]:
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
    flags: Mapping[str, Any] | None = None,
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
        values[key.name] = dict(key.default or {}) if key.kind == "section" else _copy(key.default)
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
    flags: Mapping[str, Any],
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

    def above(name: str) -> Any:
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


def _copy(value: Any) -> Any:
    return list(value) if isinstance(value, list) else value


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


# --------------------------------------------------------------------------- writing


def save_config_file(data: Mapping[str, Any], path: str | os.PathLike) -> Path:
    """Write ``data`` to ``path``: JSON when it ends in ``.json``, YAML otherwise."""
    path = Path(path).expanduser()
    path.parent.mkdir(parents=True, exist_ok=True)
    clean = {
        k: v
        for k, v in data.items()
        if v is not None or k in ("main_process_ip", "main_process_port")
    }
    if path.suffix.lower() == ".json":
        path.write_text(json.dumps(clean, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    else:
        import yaml

        path.write_text(yaml.safe_dump(clean, sort_keys=True), encoding="utf-8")
    return path


STANDARD_KEYS: tuple[str, ...] = tuple(sorted(key.name for key in CORE_SECTION if key.standard))
"""Keys every config file accel writes holds (as Accelerate's do)."""


def standard_config() -> dict[str, Any]:
    """The default config: every :data:`STANDARD_KEYS` key with its default, one process.

    ``accel config`` starts from it (answers replace its values), ``accel config update``
    adds what a file lacks from it, and :func:`basic_config` fills in this machine's devices.
    """
    config = {name: _copy(KEYS[name].default) for name in STANDARD_KEYS}
    config["distributed_type"] = "NO"  # written explicitly: the key's default (None) means "derive"
    return config


def basic_config(mixed_precision: str = "no") -> dict[str, Any]:
    """The config :func:`write_basic_config` writes for this machine's devices."""
    precision = KEYS["mixed_precision"].convert(
        mixed_precision, "write_basic_config: mixed_precision"
    )
    config = standard_config()
    config["mixed_precision"] = precision
    kind, count = _count_devices()
    if count > 0:
        config["gpu_ids"] = "all"
        config["num_processes"] = count
        if count > 1:
            config["distributed_type"] = catalog.DEVICE_KINDS[kind].distributed_type
    else:
        config["use_cpu"] = True
    return config


def _count_devices() -> tuple[str, int]:
    from accel import devices  # imports torch when called: this module stays torch-free

    kind = devices.available_kind()
    return (kind, devices.device_count(kind)) if kind else ("cpu", 0)


def write_basic_config(
    mixed_precision: str = "no", save_location: str | os.PathLike | None = None
) -> Path | bool:
    """Write a config for all of this machine's GPUs (or the CPU) with ``mixed_precision``.

    Writes to ``save_location`` (default: :func:`default_config_file`), YAML unless the
    name ends in ``.json``. An existing file is left alone and False is returned;
    otherwise the path written.
    """
    path = Path(save_location).expanduser() if save_location else default_config_file()
    if path.exists():
        print(
            f"Configuration already exists at {path}, will not override. "
            "Run `accel config` manually or pass a different `save_location`."
        )
        return False
    return save_config_file(basic_config(mixed_precision), path)


# --------------------------------------------------------------------------- workers


__all__ = [
    "CONFIG_FILE_NAME",
    "KEYS",
    "STANDARD_KEYS",
    "ResolvedConfig",
    "Source",
    "basic_config",
    "check_sections",
    "default_config_dir",
    "default_config_file",
    "find_config_file",
    "launched_config",
    "load_config_file",
    "read_config_file",
    "require_plugin",
    "resolve",
    "save_config_file",
    "section_validators",
    "standard_config",
    "validate",
    "write_basic_config",
]
