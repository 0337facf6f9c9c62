"""The ``fp8_config`` section: its keys, how each value is read, and its validator. Torch-free.

Accelerate's key names are used (``backend``, ``fp8_format``, ``margin``, ``interval``,
``amax_history_len``, ``amax_compute_algo``, ``override_linear_precision``,
``use_autocast_during_eval``, ``opt_level``, ``pad_inner_dim``,
``enable_fsdp_float8_all_gather``); the ``fp8_``-prefixed spelling of each (as the
``accel launch --fp8_*`` flags name them) is accepted too.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from accel.errors import ConfigError
from accel.utils.config_keys import parse_bool

BACKENDS = ("MSAMP", "TE", "AO")
"""FP8 backends, in the order they are tried when none is asked for."""
BACKEND_ALIASES = {
    "TE": "TE",
    "TRANSFORMER_ENGINE": "TE",
    "TRANSFORMERENGINE": "TE",
    "MSAMP": "MSAMP",
    "MS-AMP": "MSAMP",
    "MS_AMP": "MSAMP",
    "AO": "AO",
    "TORCHAO": "AO",
}
FP8_FORMATS = ("HYBRID", "E4M3")
AMAX_COMPUTE_ALGOS = ("max", "most_recent")
OPT_LEVELS = ("O1", "O2")


def backend_name(value: Any, key: str = "backend") -> str:
    """``te`` / ``TE`` / ``msamp`` / ``MSAMP`` / ``ao`` (any case) -> ``TE``, ``MSAMP`` or ``AO``."""
    text = str(getattr(value, "value", value)).strip().upper()
    if text not in BACKEND_ALIASES:
        raise ConfigError(
            f"{key}={value!r} is not an FP8 backend: use te (TransformerEngine), "
            "msamp (MS-AMP) or ao (torchao)"
        )
    return BACKEND_ALIASES[text]


def to_bool(value: Any, key: str) -> bool:
    """A boolean from a bool or from ``true``/``false``/``yes``/``no``/``1``/``0``."""
    return parse_bool(key, value)


def to_int(value: Any, key: str, minimum: int = 0) -> int:
    """An integer >= ``minimum``."""
    if isinstance(value, bool):
        raise ConfigError(f"{key}={value!r} is not an integer")
    try:
        number = int(str(value).strip())
    except (TypeError, ValueError):
        raise ConfigError(f"{key}={value!r} is not an integer") from None
    if number < minimum:
        raise ConfigError(f"{key}={value!r} must be >= {minimum}")
    return number


def fp8_format(value: Any, key: str = "fp8_format") -> str:
    """``HYBRID`` (E4M3 forward, E5M2 backward) or ``E4M3``."""
    text = str(getattr(value, "name", value)).strip().upper()
    if text == "E5M2":
        raise ConfigError(
            f"{key}=E5M2: TransformerEngine does not train in pure E5M2; use HYBRID or E4M3"
        )
    if text not in FP8_FORMATS:
        raise ConfigError(f"{key}={value!r} is not allowed: use HYBRID or E4M3")
    return text


def amax_compute_algo(value: Any, key: str = "amax_compute_algo") -> Any:
    """``max`` or ``most_recent`` (a callable, as TransformerEngine allows, is kept as is)."""
    if callable(value):
        return value
    text = str(value).strip().lower()
    if text not in AMAX_COMPUTE_ALGOS:
        raise ConfigError(f"{key}={value!r} is not allowed: use max or most_recent")
    return text


def override_linear_precision(value: Any, key: str = "override_linear_precision") -> tuple:
    """Three booleans (fprop, dgrad, wgrad) from a tuple/list or a string such as
    ``(false, false, false)`` or ``false,false,true``."""
    if isinstance(value, str):
        parts = [p for p in re.split(r"[\s,()\[\]]+", value) if p]
    elif isinstance(value, (list, tuple)):
        parts = list(value)
    else:
        parts = [value]
    if len(parts) != 3:
        raise ConfigError(
            f"{key}={value!r} needs three booleans (fprop, dgrad, wgrad), "
            "e.g. (false, false, false)"
        )
    return tuple(to_bool(p, key) for p in parts)


def opt_level(value: Any, key: str = "opt_level") -> str:
    """MS-AMP's ``O1`` or ``O2`` (the letter O)."""
    text = str(value).strip().upper()
    if text in ("01", "02"):
        raise ConfigError(f"{key}={value!r}: use the letter O, not zero: O1 or O2")
    if text not in OPT_LEVELS:
        raise ConfigError(f"{key}={value!r} is not allowed: use O1 or O2")
    return text


SECTION_KEYS: dict[str, tuple[Callable[[Any, str], Any], str]] = {
    "backend": (backend_name, "te, msamp or ao (any case)"),
    "fp8_format": (fp8_format, "HYBRID or E4M3"),
    "margin": (lambda v, k: to_int(v, k), "an integer >= 0"),
    "interval": (lambda v, k: to_int(v, k, 1), "an integer >= 1"),
    "amax_history_len": (lambda v, k: to_int(v, k, 1), "an integer >= 1"),
    "amax_compute_algo": (amax_compute_algo, "max or most_recent"),
    "override_linear_precision": (
        override_linear_precision,
        "three booleans, e.g. (false, false, false)",
    ),
    "use_autocast_during_eval": (to_bool, "true or false"),
    "opt_level": (opt_level, "O1 or O2"),
    "pad_inner_dim": (to_bool, "true or false"),
    "enable_fsdp_float8_all_gather": (to_bool, "true or false"),
}
"""Each ``fp8_config`` key: (function reading its value, what it accepts)."""

_ALIASES = {
    "optimization_level": "opt_level",
    "amax_history_length": "amax_history_len",
    "amax_compute_algorithm": "amax_compute_algo",
}
"""Other spellings, among them the keys ``accelerate config`` writes."""


def canonical_key(key: str) -> str | None:
    """The section key ``key`` stands for (``fp8_margin`` -> ``margin``), or None if unknown."""
    name = str(key).strip()
    if name in SECTION_KEYS:
        return name
    name = _ALIASES.get(name, name)
    if name.startswith("fp8_"):
        name = _ALIASES.get(name[4:], name[4:])
    return name if name in SECTION_KEYS else None


def read_section(section: Mapping[str, Any] | None) -> dict[str, Any]:
    """The section with canonical keys and parsed values; the first bad entry raises ConfigError."""
    result: dict[str, Any] = {}
    for key, value in (section or {}).items():
        name = canonical_key(key)
        if name is None:
            raise ConfigError(
                f"fp8_config.{key} is not an FP8 setting: allowed keys are {', '.join(SECTION_KEYS)}"
            )
        if value is None:
            continue
        reader, _ = SECTION_KEYS[name]
        result[name] = reader(value, f"fp8_config.{key}")
    return result


def validate_section(section: Any) -> list[str]:
    """Errors in an ``fp8_config`` section (unknown keys, bad values), one line each."""
    if not isinstance(section, Mapping):
        return [f"fp8_config must be a mapping of FP8 settings, not {type(section).__name__}"]
    errors = []
    for key, value in section.items():
        try:
            read_section({key: value})
        except ConfigError as error:
            errors.append(str(error))
    return errors


def launched_section() -> dict[str, Any]:
    """The parsed ``fp8_config`` section ``accel launch`` passed to this process (empty otherwise)."""
    from accel.utils.config import launched_config

    return read_section(launched_config().get("fp8_config") or {})
