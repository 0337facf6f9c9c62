"""bitsandbytes' parameter classes, built through their own constructors.

``Int8Params`` and ``Params4bit`` take their quantization fields in ``__new__``; torch's
``Parameter`` stub declares only ``data`` and ``requires_grad``, so a type checker rejects
those fields and the classes' ``to`` overloads. These helpers build them and return them
untyped (their state, ``CB`` / ``SCB`` / ``quant_state``, is bitsandbytes').
"""

from __future__ import annotations

from typing import Any

import torch


def int8_param(data: torch.Tensor, **fields: Any) -> Any:
    """``Int8Params(data, requires_grad=False, **fields)``."""
    from bitsandbytes.nn import Int8Params

    return Int8Params(data, requires_grad=False, **fields)


def param_4bit(data: torch.Tensor, **fields: Any) -> Any:
    """``Params4bit(data, requires_grad=False, **fields)``."""
    from bitsandbytes.nn import Params4bit

    return Params4bit(data, requires_grad=False, **fields)
