"""MS-AMP: ``msamp.initialize(model, optimizer, opt_level)`` on the objects of one ``prepare`` call.

Written against MS-AMP's documented API, ``msamp.initialize(model, optimizer=None,
opt_level='O1', use_te=False)``: it returns the cast model and an FP8-aware optimizer
(``LBAdam`` / ``LBAdamW``), and supports only ``torch.optim.Adam``, ``torch.optim.AdamW``
and DeepSpeed's ``FusedAdam``.
"""

from __future__ import annotations

import torch

SUPPORTED_OPTIMIZERS = ("Adam", "AdamW", "FusedAdam")
"""Optimizer classes ``msamp.initialize`` accepts."""


def initialize_arguments(
    objects: list[object], opt_level: str
) -> tuple[int, int, dict[str, object]] | None:
    """``(model index, optimizer index, msamp.initialize kwargs)`` for ``objects``.

    None when the call holds neither a model nor an optimizer; a clear error when it holds
    only one of them, several, or an optimizer MS-AMP cannot cast.
    """
    models = [i for i, o in enumerate(objects) if isinstance(o, torch.nn.Module)]
    optimizers = [i for i, o in enumerate(objects) if isinstance(o, torch.optim.Optimizer)]
    if not models and not optimizers:
        return None
    if not models or not optimizers:
        raise ValueError(
            "MS-AMP casts a model and its optimizer together: pass both to one "
            "accelerator.prepare(model, optimizer, ...) call"
        )
    if len(models) > 1 or len(optimizers) > 1:
        raise ValueError(
            f"MS-AMP handles one model and one optimizer per prepare call "
            f"(got {len(models)} models and {len(optimizers)} optimizers)"
        )
    optimizer = objects[optimizers[0]]
    kind = type(optimizer).__name__
    if kind not in SUPPORTED_OPTIMIZERS:
        raise ValueError(
            f"MS-AMP supports only the Adam and AdamW optimizers (got {kind}); "
            "use torch.optim.Adam / AdamW or another FP8 backend"
        )
    kwargs = {"model": objects[models[0]], "optimizer": optimizer, "opt_level": opt_level}
    return models[0], optimizers[0], kwargs


def initialize(objects: list[object], opt_level: str) -> list[object]:
    """Replace the model and the optimizer of ``objects`` by MS-AMP's cast ones."""
    found = initialize_arguments(objects, opt_level)
    if found is None:
        return objects
    model_index, optimizer_index, kwargs = found
    import msamp

    model, optimizer = msamp.initialize(**kwargs)
    result = list(objects)
    result[model_index] = model
    result[optimizer_index] = optimizer
    return result
