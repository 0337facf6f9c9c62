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

from accel.config.core_options import parse_bool
from accel.config.options import Option, Section
from accel.errors import ConfigError

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


def backend_name(value: object, key: str = "backend") -> str:
    """``te`` / ``TE`` / ``msamp`` / ``MSAMP`` / ``ao`` (any case) -> ``TE``, ``MSAMP`` or ``AO``."""
    text = str(getattr(value, "value", value)).strip().upper()
    if text not in BACKEND_ALIASES:
        raise ConfigError(
            f"{key}={value!r} is not an FP8 backend: use te (TransformerEngine), "
            "msamp (MS-AMP) or ao (torchao)"
        )
    return BACKEND_ALIASES[text]


def fp8_format(value: object, key: str = "fp8_format") -> str:
    """``HYBRID`` (E4M3 forward, E5M2 backward) or ``E4M3``."""
    text = str(getattr(value, "name", value)).strip().upper()
    if text == "E5M2":
        raise ConfigError(
            f"{key}=E5M2: TransformerEngine does not train in pure E5M2; use HYBRID or E4M3"
        )
    if text not in FP8_FORMATS:
        raise ConfigError(f"{key}={value!r} is not allowed: use HYBRID or E4M3")
    return text


def amax_compute_algo(value: object, key: str = "amax_compute_algo") -> str | Callable[..., object]:
    """``max`` or ``most_recent`` (a callable, as TransformerEngine allows, is kept as is)."""
    if callable(value):
        return value
    text = str(value).strip().lower()
    if text not in AMAX_COMPUTE_ALGOS:
        raise ConfigError(f"{key}={value!r} is not allowed: use max or most_recent")
    return text


def override_linear_precision(
    value: object, key: str = "override_linear_precision"
) -> tuple[bool, ...]:
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
    return tuple(parse_bool(key, p) for p in parts)


def opt_level(value: object, key: str = "opt_level") -> str:
    """MS-AMP's ``O1`` or ``O2`` (the letter O)."""
    text = str(value).strip().upper()
    if text in ("01", "02"):
        raise ConfigError(f"{key}={value!r}: use the letter O, not zero: O1 or O2")
    if text not in OPT_LEVELS:
        raise ConfigError(f"{key}={value!r} is not allowed: use O1 or O2")
    return text


_ALIASES = {
    "opt_level": ("optimization_level",),
    "amax_history_len": ("amax_history_length",),
    "amax_compute_algo": ("amax_compute_algorithm",),
}
"""Other spellings, among them the keys ``accelerate config`` writes."""


def _spellings(name: str) -> tuple[str, ...]:
    """Every other accepted spelling of key ``name``: its aliases, each also with ``fp8_``."""
    names = [name, *_ALIASES.get(name, ())]
    prefixed = [f"fp8_{n}" for n in names if not n.startswith("fp8_")]
    return tuple(n for n in names[1:] + prefixed if n != name)


def _option(name: str, type_: type | str, default: object = None, **kw: Any) -> Option:
    return Option(name, type_, default, aliases=_spellings(name), **kw)


FP8_SECTION = Section(
    "fp8_config",
    [
        _option(
            "backend",
            str,
            choices=("te", "msamp", "ao"),
            reader=backend_name,
            allowed="te, msamp or ao (any case)",
            help="FP8 backend: te (TransformerEngine), msamp (MS-AMP) or ao (torchao)",
            question="Which FP8 backend do you want to use?",
        ),
        _option(
            "fp8_format",
            str,
            "HYBRID",
            choices=FP8_FORMATS,
            reader=fp8_format,
            help="te: HYBRID (E4M3 forward, E5M2 backward) or E4M3",
        ),
        _option("margin", int, 0, minimum=0, help="te: margin of the scaling factor computation"),
        _option(
            "interval",
            int,
            1,
            minimum=1,
            help="te: how often the scaling factor is recomputed (ignored by TransformerEngine)",
        ),
        _option(
            "amax_history_len", int, 1024, minimum=1, help="te: length of the amax history window"
        ),
        _option(
            "amax_compute_algo",
            str,
            "most_recent",
            choices=AMAX_COMPUTE_ALGOS,
            reader=amax_compute_algo,
            help="te: max or most_recent",
        ),
        _option(
            "override_linear_precision",
            "any",
            (False, False, False),
            reader=override_linear_precision,
            allowed="three booleans, e.g. (false, false, false)",
            help="te: fprop,dgrad,wgrad GEMMs in higher precision, e.g. false,false,true",
        ),
        _option(
            "use_autocast_during_eval",
            bool,
            False,
            store_true=True,
            help="te: keep FP8 autocast on in eval() mode",
        ),
        _option(
            "opt_level",
            str,
            "O2",
            choices=OPT_LEVELS,
            reader=opt_level,
            help="msamp: O1 or O2",
        ),
        _option(
            "pad_inner_dim",
            bool,
            True,
            help="ao: pad inner dimensions of FP8 GEMMs to multiples of 16 (true/false)",
        ),
        _option(
            "enable_fsdp_float8_all_gather",
            bool,
            None,  # True with FSDP2, False otherwise (decided by the recipe)
            help="ao: all-gather FP8 weights with FSDP2 (true/false)",
        ),
    ],
    title="FP8",
    flag_prefix="fp8_",
)
"""The ``fp8_config`` section: each key's reader, default and ``accel launch --fp8_*`` flag.

Accelerate's key names; the ``fp8_``-prefixed spelling of each (as the flags name them)
and the names ``accelerate config`` writes are accepted too.
"""


def canonical_key(key: str) -> str | None:
    """The section key ``key`` stands for (``fp8_margin`` -> ``margin``), or None if unknown."""
    option = FP8_SECTION.get(str(key).strip())
    return option.name if option is not None else None


def read_section(section: Mapping[str, object] | None) -> dict[str, object]:
    """The section with canonical keys and parsed values; the first bad entry raises ConfigError."""
    return FP8_SECTION.read(section or {}, defaults=False)


validate_section = FP8_SECTION.validate
"""Errors in an ``fp8_config`` section (unknown keys, bad values), one line each."""


def launched_section() -> dict[str, object]:
    """The parsed ``fp8_config`` section ``accel launch`` passed to this process (empty otherwise)."""
    return FP8_SECTION.read(defaults=False)


def launched_backend() -> str | None:
    """The ``backend`` of :func:`launched_section` (``TE``, ``MSAMP`` or ``AO``), None if unset."""
    value = launched_section().get("backend")
    return None if value is None else str(value)
