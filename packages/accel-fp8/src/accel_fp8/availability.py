"""Which FP8 libraries this process can use, and what to install otherwise.

A library counts as available only when it imports: a TransformerEngine wheel without its
PyTorch extension, or without CUDA libraries, raises RuntimeError / OSError /
FileNotFoundError on import instead of ImportError, and is treated as absent.
"""

from __future__ import annotations

import importlib
import importlib.util

from accel.errors import AccelError

LIBRARIES = {"AO": "torchao", "TE": "TransformerEngine", "MSAMP": "MS-AMP"}
"""The library behind each backend, by name."""
MODULES = {"AO": "torchao.float8", "TE": "transformer_engine.pytorch", "MSAMP": "msamp"}
"""The module each backend imports."""
INSTALL = {
    "AO": "pip install 'accel-fp8[ao]'",
    "TE": "pip install 'accel-fp8[te]' (needs an NVIDIA GPU with CUDA)",
    "MSAMP": "install MS-AMP from source, https://github.com/Azure/MS-AMP (needs an NVIDIA GPU with CUDA)",
}
"""How to install each backend's library."""


class FP8BackendError(AccelError, ImportError):
    """The FP8 backend asked for (or any FP8 backend) cannot be used here; says what to install."""


def unavailable_reason(backend: str) -> str | None:
    """None when ``backend``'s library imports; otherwise why not (not installed, or the error)."""
    module = MODULES[backend]
    top = module.split(".")[0]
    try:
        if importlib.util.find_spec(top) is None:
            return "is not installed"
        importlib.import_module(module)
    except ModuleNotFoundError as error:
        if (error.name or "").split(".")[0] == top:
            return "is not installed"
        return f"fails to import ({type(error).__name__}: {error})"
    except Exception as error:  # noqa: BLE001 - broken installs raise RuntimeError/OSError
        return f"fails to import ({type(error).__name__}: {error})"
    return None


def is_torchao_available() -> bool:
    """Whether torchao's float8 training imports."""
    return unavailable_reason("AO") is None


def is_transformer_engine_available() -> bool:
    """Whether TransformerEngine's PyTorch API imports (a broken install counts as absent)."""
    return unavailable_reason("TE") is None


def is_msamp_available() -> bool:
    """Whether MS-AMP imports."""
    return unavailable_reason("MSAMP") is None


def is_fp8_available() -> bool:
    """Whether any FP8 backend (MS-AMP, TransformerEngine, torchao) is available."""
    return any(unavailable_reason(b) is None for b in LIBRARIES)
