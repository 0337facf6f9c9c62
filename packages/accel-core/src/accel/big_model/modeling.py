"""Tensor placement inside modules: named tensors, moving one tensor to a device, tied parameters."""

from __future__ import annotations

from collections.abc import Iterable

import torch

from accel import devices


def named_module_tensors(
    module: torch.nn.Module, include_buffers: bool = True, recurse: bool = False
) -> Iterable[tuple[str, torch.Tensor]]:
    """Parameters (and buffers) of ``module`` with their names."""
    yield from module.named_parameters(recurse=recurse)
    if include_buffers:
        yield from module.named_buffers(recurse=recurse)


# -- helpers for big-model inference (accel.big_modeling, accel.hooks) --------------------


def set_module_tensor_to_device(
    module: torch.nn.Module,
    tensor_name: str,
    device: int | str | torch.device,
    value: torch.Tensor | None = None,
    dtype: str | torch.dtype | None = None,
    non_blocking: bool = False,
) -> None:
    """Put the parameter or buffer ``tensor_name`` (dotted, e.g. ``"blocks.0.weight"``) on ``device``.

    With ``value`` the tensor is replaced by ``value`` (same shape); floating values are cast to
    ``dtype``, or to the current tensor's dtype when ``dtype`` is None, as ``load_state_dict``
    does. No copy is made when ``value`` already has the right device and dtype. A parameter
    stays a ``Parameter`` (``requires_grad`` kept); a meta tensor needs a ``value`` to leave
    the meta device.
    """
    owner = module
    prefix, _, name = tensor_name.rpartition(".")
    if prefix:
        owner = module.get_submodule(prefix)
    if name in owner._parameters:
        old, is_buffer = owner._parameters[name], False
    elif name in owner._buffers:
        old, is_buffer = owner._buffers[name], True
    else:
        raise ValueError(
            f"{type(module).__name__} has no parameter or buffer named {tensor_name!r}"
        )
    if isinstance(dtype, str):
        dtype = getattr(torch, dtype.replace("torch.", ""))
    target = torch.device(device) if not isinstance(device, int) else _index_device(device)
    if value is None:
        if old is None:
            return
        if old.device.type == "meta" and target.type != "meta":
            raise ValueError(
                f"{tensor_name} is on the meta device (no data): pass value= to give it one, "
                "e.g. load a checkpoint with accel.load_checkpoint_in_model"
            )
        value = old
    elif old is not None and tuple(value.shape) != tuple(old.shape) and old.numel() > 0:
        raise ValueError(
            f"{tensor_name}: the value has shape {tuple(value.shape)} but the model expects "
            f"{tuple(old.shape)}"
        )
    if value.is_floating_point():
        if dtype is None and old is not None and old.is_floating_point():
            dtype = old.dtype
    else:
        dtype = None
    with torch.no_grad():
        new = value.to(device=target, dtype=dtype, non_blocking=non_blocking)
    if new is old:
        return
    if isinstance(new, torch.nn.Parameter):
        new = new.data
    if is_buffer:
        owner._buffers[name] = new
    else:
        requires_grad = bool(old.requires_grad) if old is not None else False
        owner._parameters[name] = torch.nn.Parameter(
            new, requires_grad=requires_grad and new.is_floating_point()
        )


def _index_device(index: int) -> torch.device:
    """The accelerator with number ``index`` (whichever kind is present)."""
    return devices.index_device(index)


def find_tied_parameters(model: torch.nn.Module) -> list[list[str]]:
    """Groups of parameter names that are one and the same ``Parameter`` (tied weights).

    Each group lists its names in the model's registration order, e.g.
    ``[["embed.weight", "lm_head.weight"]]``. Works on the meta device too.
    """
    groups: dict[int, list[str]] = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        groups.setdefault(id(param), []).append(name)
    return [names for names in groups.values() if len(names) > 1]


def retie_parameters(model: torch.nn.Module, tied_params: list[list[str]]) -> None:
    """Make every name of each group point at the group's first parameter again."""
    for group in tied_params:
        first = model.get_parameter(group[0])
        for name in group[1:]:
            prefix, _, attr = name.rpartition(".")
            owner = model.get_submodule(prefix) if prefix else model
            owner._parameters[attr] = first
