"""The SageMaker training job an ``accel launch`` of an ``AMAZON_SAGEMAKER`` config stands for.

:func:`job_definition` turns the resolved settings, the script and its arguments and
the launch environment into the arguments of the SDK's ``HuggingFace`` estimator
(entry point, source directory, hyperparameters, environment, instance type and
count, role, ...) plus the data inputs. It imports no SDK and touches no network, so
``accel launch`` can reject bad values (exit 2) before anything is submitted.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accel import env_vars as E
from accel.config.options import LAUNCH_CONFIG
from accel.errors import ConfigError

from ..launch_settings import launch_settings

INSTANCE_TYPE = re.compile(
    r"ml\.[a-z][a-z0-9-]*\.(?:\d*x?large|medium|small|micro|nano|metal(?:-\d+xl)?)"
)
"""SageMaker instance types: ``ml.<family>.<size>``, e.g. ``ml.p3.2xlarge``, ``ml.g5.xlarge``."""

LOCAL_INSTANCE_TYPES = ("local", "local_gpu")
"""The SDK's local mode (a container on this machine)."""

ENVIRONMENT_VALUE_LIMIT = 512
"""Longest value SageMaker accepts in a training job's Environment."""

LOCAL_ONLY_VARIABLES = {E.LAUNCH_ERROR_DIR, E.CONFIG_FILE, E.CONFIG_DIR}
"""``ACCEL_*`` variables that describe this machine, not the job: never sent."""

BOOLEAN_PITFALL = (
    "SageMaker passes script arguments as `--name value` hyperparameters: the bare flag {flag} "
    'is sent as `{flag} True`, which an argparse `action="store_true"` argument rejects; '
    "declare it with `type=bool, default=False` in the script (or pass {flag} true explicitly)"
)

DISTRIBUTIONS = {
    "MULTI_GPU": {"torch_distributed": {"enabled": True}},
    "FSDP": {"torch_distributed": {"enabled": True}},
    "DEEPSPEED": {"torch_distributed": {"enabled": True}},
    "MEGATRON_LM": {"torch_distributed": {"enabled": True}},
}
"""How each distributed type starts its processes on the training instances."""


@dataclass
class JobDefinition:
    """What is handed to the SDK: estimator arguments, data inputs, warnings."""

    estimator: dict[str, Any]
    """Keyword arguments of ``sagemaker.huggingface.HuggingFace`` (the SDK types each one;
    ``additional_args`` may pass any of them through)."""
    inputs: dict[str, str] | None = None
    """Channels for ``fit(inputs=...)`` (from ``sagemaker_inputs_file``)."""
    region: str = ""
    profile: str | None = None
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> str:
        """The definition as indented JSON (what ``--debug`` starts from)."""
        return json.dumps(
            {
                "region": self.region,
                "profile": self.profile,
                "estimator": self.estimator,
                "inputs": self.inputs,
            },
            indent=2,
            sort_keys=True,
            default=str,
        )


def check_instance_type(value: object) -> str:
    """``value`` if it is a SageMaker instance type; ConfigError naming the key otherwise."""
    text = str(value or "").strip()
    if not text:
        raise ConfigError(
            "ec2_instance_type is required for compute_environment AMAZON_SAGEMAKER; "
            "set it (e.g. ml.p3.2xlarge) or pass --ec2_instance_type"
        )
    if text in LOCAL_INSTANCE_TYPES or INSTANCE_TYPE.fullmatch(text):
        return text
    hint = f" (did you mean ml.{text}?)" if INSTANCE_TYPE.fullmatch(f"ml.{text}") else ""
    raise ConfigError(
        f"ec2_instance_type: {text!r} is not a SageMaker instance type such as ml.p3.2xlarge "
        f"(ml.<family>.<size>, or local){hint}"
    )


def _value(text: str) -> bool | int | float | str:
    """A hyperparameter value: int, float or bool when it reads as one, else the string."""
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text


def script_hyperparameters(
    args: list[str],
) -> tuple[dict[str, bool | int | float | str], list[str]]:
    """``(hyperparameters, warnings)`` from the script's ``--name value`` arguments.

    A bare ``--flag`` becomes ``True`` with the boolean-argument warning; a positional
    argument cannot be passed to SageMaker and is a ConfigError.
    """
    params: dict[str, bool | int | float | str] = {}
    notes: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if not arg.startswith("-") or arg in ("-", "--"):
            raise ConfigError(
                f"script argument {arg!r}: SageMaker passes only `--name value` arguments "
                "(hyperparameters); make it an option of the script"
            )
        name, eq, inline = arg.lstrip("-").partition("=")
        if not name:
            raise ConfigError(f"script argument {arg!r} has no name")
        if eq:
            params[name] = _value(inline)
            i += 1
        elif i + 1 < len(args) and not args[i + 1].startswith("--"):
            params[name] = _value(args[i + 1])
            i += 2
        else:
            params[name] = True
            notes.append(BOOLEAN_PITFALL.format(flag=f"--{name}"))
            i += 1
    return params, notes


def _launch_config(value: str) -> str:
    """``ACCEL_LAUNCH_CONFIG`` shrunk to SageMaker's limit: null, empty and SageMaker-only keys go."""
    if len(value) <= ENVIRONMENT_VALUE_LIMIT:
        return value
    from accel.config.core_options import KEYS, SAGEMAKER_KEYS

    data = json.loads(value)
    data = {
        k: v
        for k, v in data.items()
        if k not in SAGEMAKER_KEYS
        and v not in ({}, [], None)
        and not (k in KEYS and KEYS[k].default == v)
    }
    return json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)


def job_environment(
    env: Mapping[str, str], distributed_type: str
) -> tuple[dict[str, str], list[str]]:
    """The training job's Environment: the resolved ``ACCEL_*`` settings of this launch."""
    out = {
        name: value
        for name, value in env.items()
        if name.startswith("ACCEL_") and name not in LOCAL_ONLY_VARIABLES
    }
    notes = []
    launched = LAUNCH_CONFIG.from_env(out)
    if launched is not None:
        compact = out[E.LAUNCH_CONFIG] = _launch_config(launched)
        if len(compact) > ENVIRONMENT_VALUE_LIMIT:
            del out[E.LAUNCH_CONFIG]
            notes.append(
                "the resolved settings (ACCEL_LAUNCH_CONFIG) exceed SageMaker's 512-character "
                "limit for an environment value and are not sent; the ACCEL_* variables are"
            )
    for name, value in out.items():
        if len(value) > ENVIRONMENT_VALUE_LIMIT:
            raise ConfigError(
                f"environment variable {name} is longer than SageMaker's 512 characters"
            )
    out[E.USE_SAGEMAKER] = "true"
    out[E.SAGEMAKER_DISTRIBUTED_TYPE] = distributed_type
    return out, notes


def _read_inputs(path: str) -> dict[str, str]:
    """Channels from a tab-separated file: a header line, then ``channel<TAB>s3://...`` lines."""
    lines = _lines(path, "sagemaker_inputs_file")
    channels = {}
    for number, line in enumerate(lines[1:], start=2):
        name, tab, uri = line.partition("\t")
        if not tab or not name.strip() or not uri.strip():
            raise ConfigError(
                f"sagemaker_inputs_file: {path}:{number}: expected `channel<TAB>s3://bucket/path`"
            )
        channels[name.strip()] = uri.strip()
    return channels


def _read_metrics(path: str) -> list[dict[str, str]]:
    """Metric definitions from a tab-separated file: a header line, then ``name<TAB>regex`` lines."""
    lines = _lines(path, "sagemaker_metrics_file")
    metrics = []
    for number, line in enumerate(lines[1:], start=2):
        name, tab, regex = line.partition("\t")
        if not tab or not name.strip() or not regex.strip():
            raise ConfigError(f"sagemaker_metrics_file: {path}:{number}: expected `name<TAB>regex`")
        metrics.append({"Name": name.strip(), "Regex": regex.strip()})
    return metrics


def _lines(path: str, key: str) -> list[str]:
    file = Path(path).expanduser()
    if not file.is_file():
        raise ConfigError(f"{key}: {path} does not exist; fix the path or remove the key")
    return [line for line in file.read_text(encoding="utf-8").splitlines() if line.strip()]


def _required(config: Mapping[str, object], key: str, example: str) -> str:
    value = config.get(key)
    if value in (None, ""):
        raise ConfigError(
            f"{key} is required for compute_environment AMAZON_SAGEMAKER; set it in the config "
            f"file (e.g. {key}: {example}) or pass --{key}"
        )
    return str(value)


def job_definition(
    config: Mapping[str, object], script: list[str], env: Mapping[str, str] | None = None
) -> JobDefinition:
    """The training job for ``config`` running ``script`` (path and arguments)."""
    settings = launch_settings(config)
    env = os.environ if env is None else env
    if config.get("module") or config.get("no_python"):
        raise ConfigError(
            "SageMaker runs a Python script file: --module and --no_python cannot be used with "
            "compute_environment AMAZON_SAGEMAKER"
        )
    path, *args = script
    entry_point = os.path.basename(path)
    if not entry_point.endswith(".py"):
        raise ConfigError(f"SageMaker runs a Python script file, not {path!r}; pass a .py file")
    source_dir = os.path.dirname(path) or "."
    instance_type = check_instance_type(config.get("ec2_instance_type"))
    role = _required(config, "iam_role_name", "MY_IAM_ROLE_NAME")
    region = _required(config, "region", "us-east-1")
    extra = config.get("additional_args") or {}
    if not isinstance(extra, Mapping):
        raise ConfigError("additional_args must be a mapping of estimator arguments")
    if "image_uri" not in extra:
        for key, example in (
            ("transformers_version", "4.17.0"),
            ("pytorch_version", "1.10.2"),
            ("py_version", "py38"),
        ):
            _required(config, key, example)
    hyperparameters, notes = script_hyperparameters(args)
    dtype = str(config.get("distributed_type") or "NO")
    environment, env_notes = job_environment(env, dtype)
    metrics_file = settings.get("sagemaker_metrics_file")
    estimator: dict[str, object] = {
        "entry_point": entry_point,
        "source_dir": source_dir,
        "role": role,
        "transformers_version": str(config.get("transformers_version") or "") or None,
        "pytorch_version": str(config.get("pytorch_version") or "") or None,
        "py_version": str(config.get("py_version") or "") or None,
        "base_job_name": config.get("base_job_name") or None,
        "instance_count": int(settings.get("num_machines") or 1),
        "instance_type": instance_type,
        "debugger_hook_config": False,
        "distribution": DISTRIBUTIONS.get(dtype),
        "hyperparameters": hyperparameters,
        "environment": environment,
        "metric_definitions": _read_metrics(metrics_file) if metrics_file else None,
    }
    estimator.update(extra)
    inputs_file = settings.get("sagemaker_inputs_file")
    inputs = _read_inputs(inputs_file) if inputs_file else None
    return JobDefinition(
        estimator={k: v for k, v in estimator.items() if v is not None},
        inputs=inputs,
        region=region,
        profile=settings.get("profile") or None,
        warnings=notes + env_notes,
    )


__all__ = [
    "BOOLEAN_PITFALL",
    "JobDefinition",
    "check_instance_type",
    "job_definition",
    "job_environment",
    "script_hyperparameters",
]
