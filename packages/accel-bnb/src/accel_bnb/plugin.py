"""Entry-point module of accel-bnb: the quantizer and the re-exported config. Imports nothing heavy."""

from __future__ import annotations

from accel.hookspecs import hookimpl


@hookimpl
def accel_quantizers() -> list[type]:
    """The bitsandbytes quantizer (selected by a ``BnbQuantizationConfig``)."""
    from .quantizer import BnbQuantizer

    return [BnbQuantizer]


@hookimpl
def accel_exports() -> dict[str, str]:
    """``accel.utils.BnbQuantizationConfig``."""
    return {"BnbQuantizationConfig": "accel_bnb.config:BnbQuantizationConfig"}


@hookimpl
def accel_env_info() -> dict[str, str]:
    """The installed bitsandbytes version, for ``accel env``."""
    from accel.imports import installed_version

    return {"bitsandbytes version": installed_version("bitsandbytes", missing="not installed")}
