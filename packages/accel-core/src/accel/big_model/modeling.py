"""Tensor placement inside modules: named tensors, moving one tensor to a device, tied parameters."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, overload

import torch

from accel import devices

TiedParamsMap = dict[int, dict["int | str | torch.device", torch.Tensor]]
"""``{data_ptr of a tied weight: {device as given: its copy there}}`` (see :func:`set_module_tensor_to_device`)."""


def named_module_tensors(
    module: torch.nn.Module,
    include_buffers: bool = True,
    recurse: bool = False,
    remove_non_persistent: bool = False,
) -> Iterable[tuple[str, torch.Tensor]]:
    """Parameters (and buffers) of ``module`` with their names.

    ``remove_non_persistent`` leaves out buffers registered with ``persistent=False``
    (those a state dict does not hold).
    """
    yield from module.named_parameters(recurse=recurse)
    if not include_buffers:
        return
    skipped: set[str] = set()
    if remove_non_persistent:
        for name, sub in module.named_modules() if recurse else [("", module)]:
            prefix = f"{name}." if name else ""
            skipped |= {prefix + b for b in sub._non_persistent_buffers_set}
    for name, buffer in module.named_buffers(recurse=recurse):
        if name not in skipped:
            yield name, buffer


def extract_submodules_state_dict(
    state_dict: dict[str, torch.Tensor], submodule_names: list[str]
) -> dict[str, torch.Tensor]:
    """The entries of ``state_dict`` that belong to one of ``submodule_names`` (the name or under it)."""
    result = {}
    for module_name in submodule_names:
        result.update(
            {
                key: value
                for key, value in state_dict.items()
                if key == module_name or key.startswith(module_name + ".")
            }
        )
    return result


# -- helpers for big-model inference (accel.big_modeling, accel.hooks) --------------------


def set_module_tensor_to_device(
    module: torch.nn.Module,
    tensor_name: str,
    device: int | str | torch.device,
    value: torch.Tensor | None = None,
    dtype: str | torch.dtype | None = None,
    fp16_statistics: torch.Tensor | None = None,
    tied_params_map: TiedParamsMap | None = None,
    non_blocking: bool = False,
    clear_cache: bool = True,
) -> None:
    """Put the parameter or buffer ``tensor_name`` (dotted, e.g. ``"blocks.0.weight"``) on ``device``.

    With ``value`` the tensor is replaced by ``value`` (same shape); floating values are cast to
    ``dtype``, or to the current tensor's dtype when ``dtype`` is None, as ``load_state_dict``
    does. No copy is made when ``value`` already has the right device and dtype. A parameter
    stays a ``Parameter`` (``requires_grad`` kept); a meta tensor needs a ``value`` to leave
    the meta device. The keywords are Accelerate's:

    - ``fp16_statistics``: set as the new parameter's ``SCB`` attribute (the scales of a
      bitsandbytes int8 weight), on ``device``;
    - ``tied_params_map``: ``{data_ptr: {device: tensor}}`` for tied weights; when the data of
      ``value`` (or of the current tensor) is a key and already has a copy on ``device``, that
      copy is reused instead of making another; a new copy is recorded there;
    - ``non_blocking``: asynchronous host-to-device copies where possible;
    - ``clear_cache``: empty the accelerator's cache after moving a tensor to it (callers that
      place many tensors in a row, as diffusers' loader does, pass False).
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
    # a tied weight already on ``device``: point at that copy (keyed by the device as given)
    if tied_params_map is not None and not is_buffer:
        for source in (value, old):
            if source is None:
                continue
            copies = tied_params_map.get(source.data_ptr())
            if copies is not None and device in copies:
                # a tied copy may be a plain tensor (the hooks load them so), kept as it is
                owner._parameters[name] = copies[device]  # ty: ignore[invalid-assignment]
                return
    if isinstance(dtype, str):
        dtype = getattr(torch, dtype.replace("torch.", ""))
    target = torch.device(device) if not isinstance(device, int) else _index_device(device)
    source_value = value
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
            f'Trying to set a tensor of shape {value.shape} in "{tensor_name.rsplit(".", 1)[-1]}" '
            f"(which has shape {old.shape}), this looks incorrect."
        )
    if value.is_floating_point():
        if dtype is None and old is not None and old.is_floating_point():
            dtype = old.dtype
    else:
        dtype = None
    with torch.no_grad():
        new = value.to(device=target, dtype=dtype, non_blocking=non_blocking)
    if new is old and fp16_statistics is None:
        return
    if new is not old:
        if isinstance(new, torch.nn.Parameter):
            new = new.data
        if is_buffer:
            owner._buffers[name] = new
        else:
            new = _as_parameter(old, new)
            owner._parameters[name] = new
    if fp16_statistics is not None and not is_buffer:
        # bitsandbytes' int8 statistics, an attribute torch's Parameter does not declare
        owner._parameters[name].SCB = fp16_statistics.to(  # ty: ignore[invalid-assignment]
            target, non_blocking=non_blocking
        )
    if clear_cache and target.type not in ("cpu", "meta"):
        from accel.memory import clear_device_cache  # a lower layer; imported when first needed

        clear_device_cache()
    if tied_params_map is not None and not is_buffer:
        # remember the copy on ``device`` of a tied weight, for its other names
        placed = owner._parameters[name]
        for source in (old, source_value):
            if placed is not None and source is not None and source.data_ptr() in tied_params_map:
                tied_params_map[source.data_ptr()].setdefault(device, placed)
                break


def _as_parameter(old: torch.Tensor | None, data: torch.Tensor) -> torch.nn.Parameter:
    """``data`` as a plain ``Parameter``, keeping ``requires_grad`` and the flag transformers
    sets on loaded weights (``_is_hf_initialized``).

    The class of ``old`` is not kept: a quantized parameter class (bitsandbytes'
    ``Int8Params``) carries state a bare rebuild would lose; accel-bnb's hooks wrap the
    plain tensor again with that state.
    """
    requires_grad = bool(old.requires_grad) if old is not None else False
    requires_grad = requires_grad and (data.is_floating_point() or data.is_complex())
    param = torch.nn.Parameter(data, requires_grad=requires_grad)
    initialized = getattr(old, "_is_hf_initialized", None)
    if initialized is not None:
        # transformers' flag, an attribute torch's Parameter does not declare
        param._is_hf_initialized = initialized  # ty: ignore[missing-attribute]
    return param


def get_non_persistent_buffers(
    module: torch.nn.Module, recurse: bool = False, fqns: bool = False
) -> set[str]:
    """Names of the buffers of ``module`` registered with ``persistent=False`` (no state dict holds them).

    With ``recurse`` those of the submodules too, by their own names, or by their dotted names
    relative to ``module`` with ``fqns``. A new set is returned (the module's is not changed).
    """
    names = set(module._non_persistent_buffers_set)
    if recurse:
        for sub_name, sub in module.named_modules():
            if not sub_name:
                continue
            own = sub._non_persistent_buffers_set
            names |= {f"{sub_name}.{b}" for b in own} if fqns else set(own)
    return names


def check_device_same(first_device: torch.device, second_device: torch.device) -> bool:
    """Whether two devices are the same one: ``cuda`` (no index) and ``cuda:0`` are, unlike ``==``."""
    if first_device.type != second_device.type:
        return False
    if first_device.type == "cpu":
        return True
    return (first_device.index or 0) == (second_device.index or 0)


def is_peft_model(model: torch.nn.Module) -> bool:
    """Whether ``model``, once unwrapped (DDP, compile, ...), is a PEFT ``PeftModel``; False without peft."""
    import importlib.util

    if importlib.util.find_spec("peft") is None:
        return False
    from peft import PeftModel

    from accel.unwrap import extract_model_from_parallel

    return isinstance(extract_model_from_parallel(model), PeftModel)


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


def check_tied_parameters_in_config(model: torch.nn.Module) -> bool:
    """Whether ``model``'s (transformers) config asks for tied word embeddings or encoder/decoder weights."""
    config = getattr(model, "config", None)
    if config is None:
        return False
    tied = bool(getattr(config, "tie_word_embeddings", False)) or bool(
        getattr(config, "is_encoder_decoder", False)
        and getattr(config, "tie_encoder_decoder", False)
    )
    has_inputs = callable(getattr(model, "get_input_embeddings", None))
    return tied and has_inputs


@overload
def get_module_children_bottom_up(
    model: torch.nn.Module, return_fqns: Literal[False] = False
) -> list[torch.nn.Module]: ...


@overload
def get_module_children_bottom_up(
    model: torch.nn.Module, return_fqns: Literal[True]
) -> list[str]: ...


def get_module_children_bottom_up(
    model: torch.nn.Module, return_fqns: bool = False
) -> list[torch.nn.Module] | list[str]:
    """Every module of ``model``, children before their parents (the model last); names with ``return_fqns``."""
    pending: list[tuple[str, torch.nn.Module]] = [("", model)]
    visited: list[tuple[str, torch.nn.Module]] = []
    while pending:  # depth first, last child first; reversed below: Accelerate's order
        name, module = pending.pop()
        visited.append((name, module))
        for child_name, child in module.named_children():
            pending.append((f"{name}.{child_name}" if name else child_name, child))
    visited.reverse()
    return [name for name, _ in visited] if return_fqns else [module for _, module in visited]
