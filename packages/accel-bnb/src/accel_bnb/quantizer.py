"""The bitsandbytes quantizer behind ``accel.utils.load_and_quantize_model``."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping

import torch
from accel.big_model.device_map import (
    Device,
    check_device_map,
    device_for,
    get_balanced_memory,
    get_max_memory,
    infer_auto_device_map,
    main_device,
    normalize_device,
)
from accel.big_model.dispatch import DEVICE_MAP_STRATEGIES, dispatch_model
from accel.big_model.offload import save_offload_index
from accel.quantization import Quantizer

from .config import BnbQuantizationConfig
from .hooks import attach_int8_hooks
from .loading import QuantizedLoader, checkpoint_tensors, is_offloaded
from .replace import default_skip_modules, layers_to_quantize, matches, replace_with_bnb_layers

logger = logging.getLogger(__name__)


def _require_bitsandbytes() -> None:
    try:
        import bitsandbytes  # noqa: F401
    except ImportError as exc:
        raise ImportError(
            f"load_and_quantize_model needs bitsandbytes: pip install bitsandbytes ({exc})"
        ) from exc


def _default_device() -> Device:
    """The first accelerator, or the CPU when there is none."""
    return next((d for d in get_max_memory() if d not in ("cpu", "disk")), "cpu")


def _module_devices(
    name: str, device_map: Mapping[str, Device], tensors: Iterable[str]
) -> set[Device]:
    """Devices the tensors of module ``name`` are mapped to."""
    return {device_for(f"{name}.{t}", device_map) for t in tensors}


def plan_device_map(
    model: torch.nn.Module,
    config: BnbQuantizationConfig,
    device_map: str | Mapping[str, object] | None,
    to_quantize: list[str],
    max_memory: Mapping[Device, int | str] | None,
    no_split_module_classes: list[str] | None,
) -> dict[str, Device]:
    """The device map to load with: ``None`` -> everything on the first accelerator (or the CPU);
    a strategy name -> planned with quantized weights counted at one byte per value (an
    over-estimate for 4-bit); a dict -> checked."""
    if device_map is None:
        return {"": _default_device()}
    if isinstance(device_map, Mapping):
        result = {name: normalize_device(d) for name, d in device_map.items()}
        check_device_map(model, result)
        return result
    if device_map not in DEVICE_MAP_STRATEGIES:
        raise ValueError(
            f"device_map={device_map!r}: use a dict or one of {', '.join(DEVICE_MAP_STRATEGIES)}"
        )
    quantized = {f"{name}.weight" for name in to_quantize}
    special: dict[str, torch.dtype] = {}
    for name, param in model.named_parameters():
        if name in quantized or not param.is_floating_point():
            continue
        owner = name.rpartition(".")[0]
        fp32 = config.keep_in_fp32_modules and matches(owner, config.keep_in_fp32_modules)
        dtype = config.torch_dtype  # a torch.dtype after the config's __post_init__
        special[name] = (
            torch.float32 if fp32 else (dtype if isinstance(dtype, torch.dtype) else param.dtype)
        )
    if device_map != "sequential":
        max_memory = get_balanced_memory(
            model,
            max_memory=max_memory,
            no_split_module_classes=no_split_module_classes,
            dtype=torch.int8,
            special_dtypes=special,
            low_zero=device_map == "balanced_low_0",
        )
    planned = infer_auto_device_map(
        model,
        max_memory=max_memory,
        no_split_module_classes=no_split_module_classes,
        dtype=torch.int8,
        special_dtypes=special,
    )
    main = main_device(planned)
    if config.load_in_4bit and any(is_offloaded(d, main) for d in planned.values()):
        raise ValueError(
            f"device_map={device_map!r} offloads part of the 4-bit model to the CPU or the disk "
            f"({sorted(set(planned.values()), key=str)}): give the accelerators more memory "
            "(max_memory), or pass a device_map dict, whose offloaded modules are kept "
            "unquantized in torch_dtype"
        )
    return planned


class BnbQuantizer(Quantizer):
    """bitsandbytes 8-bit (LLM.int8()) and 4-bit (fp4/nf4) quantization of ``nn.Linear`` layers."""

    name = "bnb"
    config_class_names = ("BnbQuantizationConfig",)

    def quantize(
        self,
        model: torch.nn.Module,
        config: object,
        weights_location: str | os.PathLike | None = None,
        device_map: str | Mapping[str, object] | None = None,
        no_split_module_classes: list[str] | None = None,
        max_memory: dict | None = None,
        offload_folder: str | os.PathLike | None = None,
        offload_state_dict: bool = False,
    ) -> torch.nn.Module:
        """Swap ``model``'s Linear layers for bnb layers, load and quantize the weights, dispatch.

        ``model`` is normally built under ``init_empty_weights`` and ``weights_location`` is a
        checkpoint file, sharded index or folder (full-precision, or saved from a model
        quantized the same way). A model that already holds its weights may be quantized in
        place without ``weights_location``. Modules that ``device_map`` puts on ``"disk"`` (or on
        ``"cpu"`` when an accelerator runs the model) are offloaded: converted to int8 for
        8-bit, kept unquantized in ``torch_dtype`` for 4-bit. Weights are streamed one tensor
        at a time and quantized as they are read, so at most one shard is held in memory:
        ``offload_state_dict`` is accepted for compatibility and changes nothing.
        """
        if not isinstance(config, BnbQuantizationConfig):
            raise TypeError(
                f"bnb_quantization_config must be a BnbQuantizationConfig, got {type(config).__name__}"
            )
        _require_bitsandbytes()
        state = model.state_dict(keep_vars=True)
        empty = any(t.device.type == "meta" for t in state.values())
        if weights_location is None and empty:
            raise ValueError(
                "load_and_quantize_model: the model has no weights (built under "
                "init_empty_weights): pass weights_location= (a checkpoint file, index or folder)"
            )
        if weights_location is not None and not os.path.exists(weights_location):
            raise ValueError(f"weights_location {os.fspath(weights_location)} does not exist")
        original_dtypes = {name: t.dtype for name, t in state.items()}
        source = (
            checkpoint_tensors(weights_location)
            if weights_location is not None
            else iter({name: t.detach() for name, t in state.items()}.items())
        )
        skip = (
            config.skip_modules if config.skip_modules is not None else default_skip_modules(model)
        )
        to_quantize = layers_to_quantize(model, [*skip, *(config.keep_in_fp32_modules or [])])
        device_map = plan_device_map(
            model, config, device_map, to_quantize, max_memory, no_split_module_classes
        )
        main = main_device(device_map)
        if "disk" in device_map.values() and offload_folder is None:
            raise ValueError(
                "the device map puts modules on 'disk': pass offload_folder=... to say where "
                "to write them"
            )
        offloaded = {
            name
            for name in to_quantize
            if any(
                is_offloaded(d, main) for d in _module_devices(name, device_map, ("weight", "bias"))
            )
        }
        if config.load_in_4bit:  # offloaded 4-bit modules stay in torch_dtype
            to_quantize = [name for name in to_quantize if name not in offloaded]
            offloaded = set()
        replace_with_bnb_layers(model, config, to_quantize)
        loader = QuantizedLoader(model, config, device_map, main, offload_folder, original_dtypes)
        for name, tensor in source:
            loader.add(name, tensor)
        loader.finish()
        if loader.offload_index:
            assert offload_folder is not None  # 'disk' entries need one (checked first)
            save_offload_index(loader.offload_index, offload_folder)
        model = dispatch_model(
            model,
            device_map=device_map,
            offload_dir=offload_folder,
            state_dict=loader.ram or None,
        )
        attach_int8_hooks(model, loader.int8_layers, loader.int8_scales, offloaded)
        marks = {
            "is_loaded_in_8bit": config.load_in_8bit,
            "is_loaded_in_4bit": config.load_in_4bit,
            "bnb_quantization_config": config,
        }
        for name, value in marks.items():  # plain attributes: torch's stub allows only tensors
            setattr(model, name, value)
        logger.info(
            "quantized %d Linear layers to %d bits (%d offloaded), skipped %s",
            len(to_quantize),
            config.quantization_bits,
            len(offloaded),
            skip,
        )
        return model
