"""The config file: where it is, reading and validating it, writing it.

An Accelerate config file (YAML, or JSON when the name ends in ``.json``) loads
unchanged. Core checks its own keys (:mod:`accel.config.core_options`); each plugin checks
the section it owns (``fsdp_config``, ``deepspeed_config``, ...) through the
``accel_config_sections`` hook. Every error names the file, the key and what is allowed.
How a file's values combine with the environment and flags is :mod:`accel.config.resolution`.

This module imports neither torch nor yaml at import time: ``accel launch --help``
and bad-input errors stay fast.
"""

from __future__ import annotations

import copy
import difflib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from accel import catalog
from accel.config.core_options import (
    CORE_SECTION,
    DYNAMO_SECTION,
    KEYS,
    PROCESS_SECTION,
    SAGEMAKER_KEYS,
    SECTION_PROVIDERS,
)
from accel.config.options import Option
from accel.config.providers import require_plugin
from accel.config.registered import section_validators
from accel.errors import ConfigError

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


def validate(data: Mapping[str, object], origin: str = "<config>") -> dict[str, Any]:
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


def _read_dynamo(section: Mapping[str, object], origin: str) -> dict[str, object]:
    """``dynamo_config`` checked against :data:`~accel.config.core_options.DYNAMO_SECTION`, values typed."""
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


# --------------------------------------------------------------------------- writing


def save_config_file(data: Mapping[str, object], path: str | os.PathLike) -> Path:
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
    config = {name: copy.copy(KEYS[name].default) for name in STANDARD_KEYS}
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


__all__ = [
    "CONFIG_FILE_NAME",
    "JSON_CONFIG_FILE_NAME",
    "STANDARD_KEYS",
    "basic_config",
    "check_sections",
    "default_config_dir",
    "default_config_file",
    "find_config_file",
    "load_config_file",
    "read_config_file",
    "save_config_file",
    "standard_config",
    "validate",
    "write_basic_config",
]
