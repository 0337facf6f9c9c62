"""``load_and_quantize_model``, dispatching to quantizer plugins; the ABC of :mod:`accel.quantization.base` re-exported."""

from __future__ import annotations

import torch

from accel.quantization.base import Quantizer


def quantizer_for(config: object) -> Quantizer:
    """The installed quantizer accepting ``config``, or an error naming the package to install."""
    from accel.plugins import registry

    kind = type(config).__name__
    for cls in registry.quantizers().values():
        if kind in getattr(cls, "config_class_names", ()):
            return cls()
    raise registry._missing("quantizer", "bnb" if kind.startswith("Bnb") else kind)


def load_and_quantize_model(
    model: torch.nn.Module,
    bnb_quantization_config: object = None,
    weights_location: str | None = None,
    device_map: str | dict[str, int | str | torch.device] | None = None,
    no_split_module_classes: list[str] | None = None,
    max_memory: dict | None = None,
    offload_folder: str | None = None,
    offload_state_dict: bool = False,
    quantization_config: object = None,
) -> torch.nn.Module:
    """Quantize ``model`` with the plugin matching the config (``bnb_quantization_config`` or ``quantization_config``)."""
    config = quantization_config if quantization_config is not None else bnb_quantization_config
    if config is None:
        raise ValueError(
            "load_and_quantize_model needs bnb_quantization_config= (or quantization_config=)"
        )
    return quantizer_for(config).quantize(
        model,
        config,
        weights_location=weights_location,
        device_map=device_map,
        no_split_module_classes=no_split_module_classes,
        max_memory=max_memory,
        offload_folder=offload_folder,
        offload_state_dict=offload_state_dict,
    )


__all__ = ["Quantizer", "load_and_quantize_model", "quantizer_for"]
