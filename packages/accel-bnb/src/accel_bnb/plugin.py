"""Entry-point module of accel-bnb: the quantizer and the re-exported config. Imports nothing heavy."""

from __future__ import annotations

from accel.hookspecs import hookimpl
from accel.lazy import catalog_exports


@hookimpl
def accel_quantizers() -> list[type]:
    """The bitsandbytes quantizer (selected by a ``BnbQuantizationConfig``)."""
    from .quantizer import BnbQuantizer

    return [BnbQuantizer]


@hookimpl
def accel_exports() -> dict[str, str]:
    """``accel.utils.BnbQuantizationConfig``.

    The rows of :data:`accel.catalog.EXPORTS` for this distribution, each served by
    ``accel_bnb``'s lazy names.
    """
    return catalog_exports("accel-bnb", "accel_bnb")


@hookimpl
def accel_env_info() -> dict[str, str]:
    """The installed bitsandbytes version, for ``accel env``."""
    from accel.imports import installed_version

    return {"bitsandbytes version": installed_version("bitsandbytes", missing="not installed")}
