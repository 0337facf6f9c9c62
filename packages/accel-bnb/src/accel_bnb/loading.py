"""Streaming weights into a model whose Linear layers were swapped for bitsandbytes layers.

Each tensor is read from the checkpoint (one shard at a time), cast, quantized when it is the
weight of a bnb layer, and put where the device map says: on its device, in RAM for CPU
offload, or in the offload folder for disk offload. Already-quantized checkpoints (written by
``accelerator.save_model`` of a quantized model) are recognised by their statistics
(``SCB`` for 8-bit, ``weight.absmax``/``weight.quant_state.*`` for 4-bit) and loaded as they are.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Mapping
from typing import Any

import torch
from accel.big_model.device_map import Device, device_for
from accel.big_model.modeling import (
    find_tied_parameters,
    retie_parameters,
    set_module_tensor_to_device,
)
from accel.big_model.offload import OffloadEntry, offload_weight
from accel.checkpoint.files import FileReader, checkpoint_files
from accel.devices import index_device
from accel.progress import progress_bar

from .config import BnbQuantizationConfig
from .params import int8_param, param_4bit
from .replace import matches

logger = logging.getLogger(__name__)

_INT8_STATS = ("SCB", "weight_format")


def is_offloaded(device: object, main: object) -> bool:
    """Whether weights placed on ``device`` are offloaded (kept off the device they run on)."""
    return device == "disk" or (device == "cpu" and main != "cpu")


def torch_device(device: Device) -> torch.device:
    """A device-map device (``0``, ``"cpu"``, ``"mps"``) as a ``torch.device``."""
    return index_device(device) if isinstance(device, int) else torch.device(device)


def checkpoint_tensors(weights_location: str | os.PathLike) -> Iterator[tuple[str, torch.Tensor]]:
    """``(name, tensor)`` for every tensor of a checkpoint file, index or folder, shard by shard.

    A tensor stored once for several tied names is yielded under each of them.
    """
    files, aliases = checkpoint_files(weights_location)
    for path in progress_bar(files, "Loading checkpoint shards", unit="shard"):
        with FileReader(path) as reader:
            targets: dict[str, list[str]] = {}
            for alias, target in {**aliases, **reader.aliases()}.items():
                targets.setdefault(target, []).append(alias)
            for key in reader.keys():
                tensor = reader.get(key)
                for name in (key, *targets.get(key, ())):
                    yield name, tensor


def _check_int8_format(name: str, value: object) -> None:
    value = value.item() if isinstance(value, torch.Tensor) else value
    if value not in (0, "row"):
        raise ValueError(f"{name}={value!r}: only the row-major 8-bit format is supported")


class QuantizedLoader:
    """Loads tensors into ``model`` (see the module docstring); call :meth:`add` per tensor, then :meth:`finish`.

    After loading: ``offload_index`` describes what went to ``offload_folder``, ``ram`` holds
    the CPU-offloaded weights, and ``int8_scales`` the scales (``SCB``) of every 8-bit layer.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        config: BnbQuantizationConfig,
        device_map: Mapping[str, Device],
        main: Device,
        offload_folder: str | os.PathLike | None,
        original_dtypes: Mapping[str, torch.dtype],
    ):
        import bitsandbytes as bnb

        self.model = model
        self.config = config
        self.device_map = device_map
        self.main = main
        self.offload_folder = offload_folder
        self.original_dtypes = original_dtypes
        self.int8_layers = {
            n: m for n, m in model.named_modules() if isinstance(m, bnb.nn.Linear8bitLt)
        }
        self.int4_layers = {
            n: m for n, m in model.named_modules() if isinstance(m, bnb.nn.Linear4bit)
        }
        self.buffers = {n for n, _ in model.named_buffers(remove_duplicate=False)}
        tensors = {n for n, _ in model.named_parameters(remove_duplicate=False)} | self.buffers
        # state_dict() adds the statistics of already-quantized layers (SCB, ...): not tensors
        self.expected = set(model.state_dict(keep_vars=True)) & tensors
        self.tied = find_tied_parameters(model)
        self.group_of = {name: i for i, group in enumerate(self.tied) for name in group}
        self.loaded_groups: set[int] = set()
        self.loaded: set[str] = set()
        self.unexpected: list[str] = []
        self.pending: dict[str, dict[str, torch.Tensor]] = {}
        self.offload_index: dict[str, OffloadEntry] = {}
        self.ram: dict[str, torch.Tensor] = {}
        self.int8_scales: dict[str, torch.Tensor] = {}

    # -- entry points ----------------------------------------------------------------------

    def add(self, name: str, tensor: torch.Tensor) -> None:
        """Load one checkpoint tensor (a model tensor or a quantization statistic)."""
        if name in self.expected:
            group = self.group_of.get(name)
            if group is not None:
                if group in self.loaded_groups:
                    self.loaded.add(name)
                    return
                self.loaded_groups.add(group)
            self._load(name, tensor)
            self.loaded.add(name)
            return
        owner = self._statistic_owner(name)
        if owner is None:
            self.unexpected.append(name)
            return
        if name.endswith(".weight_format"):
            _check_int8_format(name, tensor)
            return
        self.pending.setdefault(owner, {})[name[len(owner) + 1 :]] = tensor
        if owner in self.int8_layers:
            self._finish_int8(owner)

    def finish(self) -> None:
        """Complete pre-quantized layers, tie weights again, and check nothing is missing."""
        for owner in list(self.pending):
            if owner in self.int4_layers:
                self._finish_int4(owner)
        if self.pending:
            owner, pieces = next(iter(self.pending.items()))
            raise ValueError(
                f"the checkpoint holds an incomplete quantized layer {owner!r} (found "
                f"{sorted(pieces)}): it needs the layer's weight and all its quantization "
                "statistics; re-save the model with accelerator.save_model"
            )
        for group in self.tied:
            if self.group_of[group[0]] in self.loaded_groups:
                self.loaded.update(group)
        self._retie()
        stats = [n for n in self.unexpected if n.endswith(_INT8_STATS) or ".weight.quant" in n]
        if stats:
            raise ValueError(
                f"the checkpoint holds quantization statistics ({stats[0]}, ...) for layers "
                "this model does not quantize: load it with the BnbQuantizationConfig it was "
                "saved with (same load_in_8bit/load_in_4bit and skip_modules)"
            )
        missing = sorted(self.expected - self.loaded)
        empty = [n for n in missing if self._tensor(n).device.type == "meta"]
        if empty:
            raise ValueError(
                f"weights_location lacks {len(empty)} weights of the model (e.g. "
                f"{', '.join(empty[:5])}): pass the checkpoint this model was saved to"
            )
        if missing:
            logger.warning(
                "%d tensors of the model are not in the checkpoint and keep their values (e.g. %s)",
                len(missing),
                ", ".join(missing[:5]),
            )
        if self.unexpected:
            logger.warning(
                "%d tensors of the checkpoint are not in the model (e.g. %s)",
                len(self.unexpected),
                ", ".join(self.unexpected[:5]),
            )

    # -- placing tensors -------------------------------------------------------------------

    def _tensor(self, name: str) -> torch.Tensor:
        prefix, _, attr = name.rpartition(".")
        owner = self.model.get_submodule(prefix) if prefix else self.model
        tensor = owner._parameters.get(attr)
        if tensor is None:
            tensor = owner._buffers[attr]
        if tensor is None:
            raise KeyError(f"{name} is registered as None")
        return tensor

    def _float_dtype(self, name: str) -> torch.dtype:
        """dtype of unquantized floating weight ``name``: float32 in keep_in_fp32_modules,
        else ``torch_dtype``, else the model's."""
        if self.config.keep_in_fp32_modules and matches(
            name.rpartition(".")[0], self.config.keep_in_fp32_modules
        ):
            return torch.float32
        if isinstance(self.config.torch_dtype, torch.dtype):
            return self.config.torch_dtype
        return self.original_dtypes.get(name, torch.float32)

    def _load(self, name: str, tensor: torch.Tensor) -> None:
        owner, _, attr = name.rpartition(".")
        if attr == "weight" and owner in self.int8_layers:
            if tensor.dtype == torch.int8:
                self.pending.setdefault(owner, {})["weight"] = tensor
                self._finish_int8(owner)
                return
            self._check_float(name, tensor, "an 8-bit")
            self._quantize_int8(owner, tensor.to(self._float_dtype(name)))
            return
        if attr == "weight" and owner in self.int4_layers:
            if tensor.dtype == torch.uint8:
                self.pending.setdefault(owner, {})["weight"] = tensor
                return
            self._check_float(name, tensor, "a 4-bit")
            self._quantize_int4(owner, tensor.to(self._float_dtype(name)))
            return
        if tensor.is_floating_point():
            tensor = tensor.to(self._float_dtype(name))
        elif self.original_dtypes.get(name, tensor.dtype).is_floating_point:
            raise ValueError(
                f"{name} is stored quantized ({tensor.dtype}) in the checkpoint but this "
                "layer is not quantized: load it with the BnbQuantizationConfig it was saved "
                "with (same skip_modules / keep_in_fp32_modules)"
            )
        self._place(name, tensor)

    def _check_float(self, name: str, tensor: torch.Tensor, kind: str) -> None:
        if not tensor.is_floating_point():
            raise ValueError(
                f"{name} is stored as {tensor.dtype} in the checkpoint, which is not "
                f"{kind} bitsandbytes weight: load it with the BnbQuantizationConfig it was "
                "saved with"
            )

    def _device(self, name: str) -> Device:
        """Where tensor ``name`` goes; a tied group goes where one of its names is not offloaded."""
        group = self.group_of.get(name)
        names = self.tied[group] if group is not None else [name]
        devices = [device_for(n, self.device_map) for n in names]
        return next((d for d in devices if not is_offloaded(d, self.main)), devices[0])

    def _place(self, name: str, tensor: torch.Tensor) -> None:
        """Put an unquantized (or already packed) tensor where the device map says."""
        device = self._device(name)
        if is_offloaded(device, self.main) and name not in self.buffers:
            if device == "disk":
                assert self.offload_folder is not None  # 'disk' entries need one (checked first)
                offload_weight(tensor, name, self.offload_folder, self.offload_index)
            else:
                self.ram[name] = tensor.detach().to("cpu").contiguous()
            set_module_tensor_to_device(self.model, name, "meta", dtype=tensor.dtype)
            return
        if is_offloaded(device, self.main):
            device = self.main
        set_module_tensor_to_device(self.model, name, device, value=tensor, dtype=tensor.dtype)

    # -- quantized layers ------------------------------------------------------------------

    def _quantize_int8(self, owner: str, weight: torch.Tensor) -> None:
        quantized = int8_param(weight.detach(), has_fp16_weights=False).to("cpu")
        self._set_int8(owner, quantized.data, quantized.SCB)

    def _finish_int8(self, owner: str) -> None:
        pieces = self.pending.get(owner, {})
        if "weight" not in pieces or "SCB" not in pieces:
            return
        self.pending.pop(owner)
        self._set_int8(owner, pieces["weight"], pieces["SCB"].to(torch.float32))
        self.loaded.add(f"{owner}.weight")

    def _set_int8(self, owner: str, data: torch.Tensor, scb: torch.Tensor) -> None:
        name = f"{owner}.weight"
        device = self._device(name)
        module = self.int8_layers[owner]
        if is_offloaded(device, self.main):
            self.int8_scales[owner] = scb.to("cpu")
            self._place(name, data)
            return
        target = torch_device(device)
        data, scb = data.to(target), scb.to(target)
        module._parameters["weight"] = int8_param(data, has_fp16_weights=False, CB=data, SCB=scb)
        self.int8_scales[owner] = scb

    def _quantize_int4(self, owner: str, weight: torch.Tensor) -> None:
        module = self.int4_layers[owner]
        device = self._int4_device(owner)
        param = param_4bit(
            weight.detach(),
            compress_statistics=self.config.bnb_4bit_use_double_quant,
            quant_type=self.config.bnb_4bit_quant_type,
            quant_storage=module.quant_storage,
            module=module,
        )
        module._parameters["weight"] = param.to(device)

    def _finish_int4(self, owner: str) -> None:
        from bitsandbytes.nn import Params4bit

        pieces = self.pending.pop(owner)
        if "weight" not in pieces:
            raise ValueError(
                f"the checkpoint holds 4-bit statistics of {owner!r} but not its weight"
            )
        module = self.int4_layers[owner]
        stats = {f"weight.{k}": v for k, v in pieces.items() if k != "weight"}
        device = self._int4_device(owner)
        try:
            param = Params4bit.from_prequantized(
                data=pieces["weight"], quantized_stats=stats, device=device, module=module
            )
        except Exception as exc:  # bitsandbytes raises ValueError/KeyError on bad statistics
            raise ValueError(
                f"cannot read the 4-bit layer {owner!r} from the checkpoint ({exc}); re-save "
                "the model with accelerator.save_model"
            ) from exc
        module._parameters["weight"] = param
        self.loaded.add(f"{owner}.weight")

    def _int4_device(self, owner: str) -> torch.device:
        device = self._device(f"{owner}.weight")
        if is_offloaded(device, self.main):  # replace() never quantizes offloaded 4-bit layers
            raise AssertionError(f"4-bit layer {owner} is offloaded")
        return torch_device(device)

    def _statistic_owner(self, name: str) -> str | None:
        """The quantized layer a checkpoint statistic belongs to (``h.0.fc.SCB`` -> ``h.0.fc``)."""
        prefix, _, attr = name.rpartition(".")
        if attr in _INT8_STATS and prefix in self.int8_layers:
            return prefix
        start = name.find(".weight.")
        while start != -1:
            if name[:start] in self.int4_layers:
                return name[:start]
            start = name.find(".weight.", start + 1)
        return None

    # -- ties ------------------------------------------------------------------------------

    def _retie(self) -> None:
        """Point every name of a tied group at the one parameter that was loaded."""
        for group in self.tied:
            params = [self.model.get_parameter(name) for name in group]
            real = [n for n, p in zip(group, params) if p.device.type != "meta"]
            first = real[0] if real else group[0]
            retie_parameters(self.model, [[first] + [n for n in group if n != first]])
            _share_entry(group, self.offload_index, on_disk=True)
            _share_entry(group, self.ram, on_disk=False)


def _share_entry(group: list[str], store: dict[str, Any], on_disk: bool) -> None:
    """Give every name of a tied ``group`` missing from ``store`` the entry of one that has it
    (an offload-index entry keeps pointing at the file it was written to)."""
    source = next((n for n in group if n in store), None)
    if source is None:
        return
    for name in group:
        if name not in store:
            entry = store[source]
            if on_disk:
                entry = {**entry, "file": entry.get("file", f"{source}.dat")}
            store[name] = entry
