"""The quantizer ABC: :class:`Quantizer`, which quantizer plugins subclass."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from accel.big_model.device_map import DeviceLike


class Quantizer:
    """Quantizes a model's layers for one family of quantization configs.

    ``config_class_names`` are the class names of the configs this quantizer
    accepts (``"BnbQuantizationConfig"``); ``name`` selects it explicitly.
    """

    name: str = ""
    config_class_names: tuple[str, ...] = ()

    def quantize(
        self,
        model: torch.nn.Module,
        config: object,
        weights_location: str | None = None,
        device_map: str | Mapping[str, DeviceLike] | None = None,
        no_split_module_classes: list[str] | None = None,
        max_memory: dict | None = None,
        offload_folder: str | None = None,
        offload_state_dict: bool = False,
    ) -> torch.nn.Module:
        """Replace layers of ``model`` by quantized ones and load weights from ``weights_location``."""
        raise NotImplementedError
