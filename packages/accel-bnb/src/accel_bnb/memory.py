"""How much memory a (quantized) model's parameters take."""

from __future__ import annotations

from dataclasses import dataclass

import torch


def _nbytes(tensor: torch.Tensor | None) -> int:
    if tensor is None or tensor.device.type == "meta":
        return 0
    return tensor.numel() * tensor.element_size()


def _statistics_bytes(module: torch.nn.Module) -> int:
    """Bytes of a bnb layer's quantization statistics (8-bit row scales, 4-bit block scales)."""
    weight = module._parameters.get("weight")
    if weight is None or weight.device.type == "meta":
        return 0
    state = getattr(module, "state", None)  # Linear8bitLt keeps SCB on the weight or its state
    if state is not None and hasattr(state, "SCB"):
        scb = getattr(weight, "SCB", None)
        return _nbytes(scb if scb is not None else state.SCB)
    quant_state = getattr(weight, "quant_state", None) or getattr(module, "quant_state", None)
    if quant_state is None:
        return 0
    tensors = [quant_state.absmax, quant_state.code, getattr(quant_state, "offset", None)]
    nested = getattr(quant_state, "state2", None)
    if nested is not None:
        tensors += [nested.absmax, nested.code]
    return sum(_nbytes(t) for t in tensors if isinstance(t, torch.Tensor))


@dataclass
class MemoryReport:
    """Parameter memory of a model, in bytes (tensors offloaded to CPU RAM or disk excluded).

    ``quantized_bytes``: the bnb layers (quantized weights, quantization statistics, biases);
    ``unquantized_bytes``: every other parameter; ``buffer_bytes``: buffers;
    ``quantized_layers``: how many bnb layers; ``offloaded_tensors``: parameters kept off
    the model (on the meta device, loaded for each forward).
    """

    quantized_bytes: int
    unquantized_bytes: int
    buffer_bytes: int
    quantized_layers: int
    offloaded_tensors: int

    @property
    def total_bytes(self) -> int:
        """Parameters (with quantization statistics) plus buffers."""
        return self.quantized_bytes + self.unquantized_bytes + self.buffer_bytes

    def __str__(self) -> str:
        mib = 2**20
        return (
            f"{self.total_bytes / mib:.2f} MiB in memory: {self.quantized_layers} quantized "
            f"layers {self.quantized_bytes / mib:.2f} MiB, other parameters "
            f"{self.unquantized_bytes / mib:.2f} MiB, buffers {self.buffer_bytes / mib:.2f} MiB"
            + (f", {self.offloaded_tensors} tensors offloaded" if self.offloaded_tensors else "")
        )


def memory_report(model: torch.nn.Module) -> MemoryReport:
    """The :class:`MemoryReport` of ``model`` (tied weights counted once)."""
    import bitsandbytes as bnb

    quantized_kinds = (bnb.nn.Linear8bitLt, bnb.nn.Linear4bit)
    in_quantized_layers: set[int] = set()
    quantized = layers = 0
    for module in model.modules():
        if isinstance(module, quantized_kinds):
            layers += 1
            quantized += _statistics_bytes(module)
            for param in module.parameters(recurse=False):
                in_quantized_layers.add(id(param))
                quantized += _nbytes(param)
    unquantized = offloaded = 0
    for param in model.parameters():
        if param.device.type == "meta":
            offloaded += 1
        elif id(param) not in in_quantized_layers:
            unquantized += _nbytes(param)
    buffers = sum(_nbytes(b) for b in model.buffers())
    return MemoryReport(quantized, unquantized, buffers, layers, offloaded)


def get_memory_footprint(model: torch.nn.Module, return_buffers: bool = True) -> int:
    """Bytes taken by ``model``'s parameters (quantization statistics included), and buffers."""
    report = memory_report(model)
    return report.total_bytes if return_buffers else report.total_bytes - report.buffer_bytes
