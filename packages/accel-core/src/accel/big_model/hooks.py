"""Hooks around a module's ``forward``: run code before and after it without subclassing.

:func:`add_hook_to_module` replaces ``module.forward`` by a wrapper that calls
``hook.pre_forward`` (which may change the arguments), the original forward, then
``hook.post_forward`` (which may change the output). :func:`remove_hook_from_module`
restores the original. Big-model inference is built on one hook, :class:`AlignDevicesHook`:
it moves the inputs to the device where the module runs and, for a module whose weights
live elsewhere (CPU RAM or disk), loads them onto that device for the forward and drops
them after it.
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import torch

from accel import devices
from accel.big_model.device_map import device_for
from accel.big_model.modeling import (
    named_module_tensors,
    retie_parameters,
    set_module_tensor_to_device,
)
from accel.big_model.offload import PrefixedDataset
from accel.distributed.operations import send_to_device

HOOK_ATTR = "_accel_hook"
"""Attribute holding a module's hook."""
OLD_FORWARD_ATTR = "_accel_old_forward"
"""Attribute holding a hooked module's original ``forward``."""
TIED_ATTR = "_accel_tied_parameters"
"""Attribute of a dispatched model: its tied parameter groups, tied again when hooks are removed."""


class ModelHook:
    """Base class of hooks: every method is a no-op that subclasses override.

    ``no_grad = True`` runs the wrapped forward under ``torch.no_grad()``.
    """

    no_grad = False

    def init_hook(self, module: torch.nn.Module) -> torch.nn.Module:
        """Called once when the hook is attached; returns the module."""
        return module

    def pre_forward(
        self, module: torch.nn.Module, *args: Any, **kwargs: Any
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """Called before ``forward``; returns the (possibly changed) ``args`` and ``kwargs``."""
        return args, kwargs

    def post_forward(self, module: torch.nn.Module, output: Any) -> Any:
        """Called after ``forward``; returns the (possibly changed) output."""
        return output

    def detach_hook(self, module: torch.nn.Module) -> torch.nn.Module:
        """Called when the hook is removed; returns the module."""
        return module


class SequentialHook(ModelHook):
    """Several hooks as one: ``pre_forward`` in order, ``post_forward`` in reverse order."""

    def __init__(self, *hooks: ModelHook):
        self.hooks = list(hooks)

    @property
    def no_grad(self) -> bool:  # type: ignore[override]
        """True when any of the hooks asks for it."""
        return any(hook.no_grad for hook in self.hooks)

    def init_hook(self, module: torch.nn.Module) -> torch.nn.Module:
        """Initialise every hook in order."""
        for hook in self.hooks:
            module = hook.init_hook(module)
        return module

    def pre_forward(
        self, module: torch.nn.Module, *args: Any, **kwargs: Any
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """Each hook's ``pre_forward``, first to last."""
        for hook in self.hooks:
            args, kwargs = hook.pre_forward(module, *args, **kwargs)
        return args, kwargs

    def post_forward(self, module: torch.nn.Module, output: Any) -> Any:
        """Each hook's ``post_forward``, last to first."""
        for hook in reversed(self.hooks):
            output = hook.post_forward(module, output)
        return output

    def detach_hook(self, module: torch.nn.Module) -> torch.nn.Module:
        """Detach every hook, last to first."""
        for hook in reversed(self.hooks):
            module = hook.detach_hook(module)
        return module


def _hooked_forward(module: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
    hook: ModelHook = getattr(module, HOOK_ATTR)
    args, kwargs = hook.pre_forward(module, *args, **kwargs)
    forward = getattr(module, OLD_FORWARD_ATTR)
    if hook.no_grad:
        with torch.no_grad():
            output = forward(*args, **kwargs)
    else:
        output = forward(*args, **kwargs)
    return hook.post_forward(module, output)


def add_hook_to_module(
    module: torch.nn.Module, hook: ModelHook, append: bool = False
) -> torch.nn.Module:
    """Attach ``hook`` to ``module`` (replacing its hook, or chained after it with ``append``).

    Returns the module, whose ``forward`` now runs the hook around the original forward.
    """
    current = getattr(module, HOOK_ATTR, None)
    if append and current is not None:
        remove_hook_from_module(module)
        hook = SequentialHook(current, hook)
    elif current is not None:
        current.detach_hook(module)
    if not hasattr(module, OLD_FORWARD_ATTR):
        original = module.forward
        object.__setattr__(module, OLD_FORWARD_ATTR, original)
    else:
        original = getattr(module, OLD_FORWARD_ATTR)
    module = hook.init_hook(module)
    object.__setattr__(module, HOOK_ATTR, hook)
    wrapper = functools.partial(_hooked_forward, module)
    functools.update_wrapper(wrapper, original)
    module.forward = wrapper
    return module


def remove_hook_from_module(module: torch.nn.Module, recurse: bool = False) -> torch.nn.Module:
    """Detach the hook of ``module`` (and of all its submodules with ``recurse``), restoring ``forward``."""
    hook = module.__dict__.pop(HOOK_ATTR, None)
    if hook is not None:
        hook.detach_hook(module)
    original = module.__dict__.pop(OLD_FORWARD_ATTR, None)
    if original is not None:
        if (
            getattr(original, "__self__", None) is module
            and getattr(original, "__func__", None) is type(module).forward
        ):
            module.__dict__.pop("forward", None)
        else:
            module.forward = original
    for name in module.__dict__.pop("_accel_move_guard", ()):
        module.__dict__.pop(name, None)
    if recurse:
        for child in module.children():
            remove_hook_from_module(child, recurse=True)
    tied = module.__dict__.pop(TIED_ATTR, None)
    if tied:
        retie_parameters(module, tied)
    return module


def remove_hook_from_submodules(module: torch.nn.Module) -> None:
    """Detach the hooks of ``module`` and of every submodule (as ``remove_hook_from_module(recurse=True)``)."""
    remove_hook_from_module(module)
    for child in module.children():
        remove_hook_from_submodules(child)


def find_device(data: Any) -> torch.device | None:
    """The device of the first tensor found in ``data`` (nested lists, tuples, dicts)."""
    if isinstance(data, torch.Tensor):
        return data.device
    if isinstance(data, Mapping):
        data = list(data.values())
    if isinstance(data, (list, tuple)):
        for item in data:
            device = find_device(item)
            if device is not None:
                return device
    return None


def _as_torch_device(device: Any) -> torch.device | None:
    if device is None or isinstance(device, torch.device):
        return device
    if isinstance(device, int):
        from accel.big_model.modeling import _index_device

        return _index_device(device)
    return torch.device(device)


class AlignDevicesHook(ModelHook):
    """Run a module on ``execution_device``, whatever device its inputs and weights are on.

    Args:
        execution_device: where the forward runs; inputs are sent there (None: leave them).
        offload: the weights are not kept in the module: ``init_hook`` puts them on the meta
            device, each forward loads them from ``weights_map`` and drops them afterwards.
            Without a ``weights_map`` the module's own weights are copied to CPU RAM first.
        io_same_device: send the output back to the device the input came from.
        weights_map: mapping from tensor name (relative to the module) to its value, e.g. a
            state dict in CPU RAM or an :class:`~accel.utils.offload.OffloadedWeightsLoader`.
        offload_buffers: offload buffers too (by default they stay on the execution device).
        place_submodules: handle the tensors of all submodules, not only the module's own.
        skip_keys: keys of keyword arguments / output dicts not to move.
    """

    def __init__(
        self,
        execution_device: int | str | torch.device | None = None,
        offload: bool = False,
        io_same_device: bool = False,
        weights_map: Mapping[str, torch.Tensor] | None = None,
        offload_buffers: bool = False,
        place_submodules: bool = False,
        skip_keys: str | list[str] | None = None,
    ):
        self.execution_device = _as_torch_device(execution_device)
        self.offload = offload
        self.io_same_device = io_same_device
        self.weights_map = weights_map
        self.offload_buffers = offload_buffers
        self.place_submodules = place_submodules
        self.skip_keys = skip_keys
        self.input_device: torch.device | None = None
        self.original_devices: dict[str, torch.device] = {}

    def __repr__(self) -> str:
        return (
            f"AlignDevicesHook(execution_device={self.execution_device}, offload={self.offload}, "
            f"io_same_device={self.io_same_device}, offload_buffers={self.offload_buffers}, "
            f"place_submodules={self.place_submodules})"
        )

    def init_hook(self, module: torch.nn.Module) -> torch.nn.Module:
        """Offload the weights to the meta device, or move them to the execution device."""
        params = _names(
            module.named_parameters(recurse=self.place_submodules, remove_duplicate=False)
        )
        buffers = _names(
            module.named_buffers(recurse=self.place_submodules, remove_duplicate=False)
        )
        if self.offload:
            if (
                self.weights_map is None
            ):  # as in Accelerate: offload the module's own weights to RAM
                self.weights_map = {
                    name: tensor.detach().to("cpu")
                    for name, tensor in named_module_tensors(
                        module, include_buffers=self.offload_buffers, recurse=self.place_submodules
                    )
                }
            moved = dict(params)
            if self.offload_buffers:
                moved.update(buffers)
            for name, device in moved.items():
                self.original_devices[name] = device
                set_module_tensor_to_device(module, name, "meta")
            if not self.offload_buffers and self.execution_device is not None:
                for name in buffers:
                    _place(module, name, self.execution_device, self.weights_map)
        elif self.execution_device is not None:
            for name in [*params, *buffers]:
                _place(module, name, self.execution_device, self.weights_map)
        return module

    def pre_forward(
        self, module: torch.nn.Module, *args: Any, **kwargs: Any
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """Note the input device, load offloaded weights, move the inputs."""
        if self.io_same_device:
            self.input_device = find_device([args, kwargs])
        if self.offload:
            device = self.execution_device or torch.device("cpu")
            for name in self.original_devices:
                set_module_tensor_to_device(module, name, device, value=self.weights_map[name])
        if self.execution_device is not None:
            args = send_to_device(args, self.execution_device)
            kwargs = send_to_device(kwargs, self.execution_device, skip_keys=self.skip_keys)
        return args, kwargs

    def post_forward(self, module: torch.nn.Module, output: Any) -> Any:
        """Drop offloaded weights again; send the output back to the input's device."""
        if self.offload:
            for name in self.original_devices:
                set_module_tensor_to_device(module, name, "meta")
        if (
            self.io_same_device
            and self.input_device is not None
            and self.input_device.type != "meta"
        ):
            output = send_to_device(output, self.input_device, skip_keys=self.skip_keys)
        return output

    def detach_hook(self, module: torch.nn.Module) -> torch.nn.Module:
        """Put offloaded weights back in the module, on the devices they came from (CPU for meta)."""
        if self.offload:
            for name, device in self.original_devices.items():
                target = torch.device("cpu") if device.type == "meta" else device
                set_module_tensor_to_device(module, name, target, value=self.weights_map[name])
            self.original_devices.clear()
        return module


def _names(items: Iterable[tuple[str, torch.Tensor]]) -> dict[str, torch.device]:
    return {name: tensor.device for name, tensor in items}


def _has_tensors(module: torch.nn.Module) -> bool:
    return any(t is not None for t in module._parameters.values()) or any(
        t is not None for t in module._buffers.values()
    )


def _place(
    module: torch.nn.Module,
    name: str,
    device: torch.device,
    weights_map: Mapping[str, torch.Tensor] | None,
) -> None:
    """Move one tensor to ``device``; a meta tensor takes its value from ``weights_map``."""
    prefix, _, attr = name.rpartition(".")
    owner = module.get_submodule(prefix) if prefix else module
    tensor = owner._parameters.get(attr)
    if tensor is None:
        tensor = owner._buffers.get(attr)
    if tensor is None:
        return
    value = None
    if tensor.device.type == "meta" and weights_map is not None and name in weights_map:
        value = weights_map[name]
    set_module_tensor_to_device(module, name, device, value=value)


class CpuOffload(ModelHook):
    """Keep a whole model on the CPU and move it to ``execution_device`` when it runs.

    It stays there after its forward until ``prev_module_hook`` of the *next* model offloads
    it (see :func:`accel.cpu_offload_with_hook`).
    """

    def __init__(
        self,
        execution_device: int | str | torch.device | None = None,
        prev_module_hook: UserCpuOffloadHook | None = None,
    ):
        self.execution_device = _as_torch_device(execution_device) or _default_execution_device()
        self.prev_module_hook = prev_module_hook

    def init_hook(self, module: torch.nn.Module) -> torch.nn.Module:
        """Send the model to the CPU."""
        return module.to("cpu")

    def pre_forward(
        self, module: torch.nn.Module, *args: Any, **kwargs: Any
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """Offload the previous model, bring this one to the execution device with its inputs."""
        if self.prev_module_hook is not None:
            self.prev_module_hook.offload()
        module.to(self.execution_device)
        return send_to_device(args, self.execution_device), send_to_device(
            kwargs, self.execution_device
        )


class UserCpuOffloadHook:
    """Handle returned by :func:`accel.cpu_offload_with_hook`: ``offload()`` and ``remove()``."""

    def __init__(self, model: torch.nn.Module, hook: CpuOffload):
        self.model = model
        self.hook = hook

    def offload(self) -> None:
        """Send the model back to the CPU."""
        self.hook.init_hook(self.model)

    def remove(self) -> None:
        """Remove the hook from the model."""
        remove_hook_from_module(self.model)


def _default_execution_device() -> torch.device:
    return devices.default_device(0)


def _prefix(module_name: str) -> str:
    return f"{module_name}." if module_name else ""


def attach_execution_device_hook(
    module: torch.nn.Module,
    execution_device: int | str | torch.device | Mapping[str, Any],
    skip_keys: str | list[str] | None = None,
    preload_module_classes: Iterable[str] | None = None,
    module_name: str = "",
) -> None:
    """Add a hook moving the inputs to the execution device to every submodule that has weights.

    ``execution_device`` is one device, or a device map ``{module name: device}`` (the longest
    name prefixing a module gives its device). A class in ``preload_module_classes`` gets one
    hook for all its submodules.
    """
    preload = set(preload_module_classes or ())
    is_preload = type(module).__name__ in preload
    if isinstance(execution_device, Mapping):
        try:
            device = device_for(module_name, execution_device)
        except KeyError:
            device = None
    else:
        device = execution_device
    if device is not None and (_has_tensors(module) or is_preload):
        add_hook_to_module(module, AlignDevicesHook(device, skip_keys=skip_keys), append=True)
    if is_preload:
        return
    for name, child in module.named_children():
        attach_execution_device_hook(
            child, execution_device, skip_keys, preload, module_name=_prefix(module_name) + name
        )


def attach_align_device_hook(
    module: torch.nn.Module,
    execution_device: int | str | torch.device | None = None,
    offload: bool = False,
    weights_map: Mapping[str, torch.Tensor] | None = None,
    offload_buffers: bool = False,
    module_name: str = "",
    skip_keys: str | list[str] | None = None,
    preload_module_classes: Iterable[str] | None = None,
) -> None:
    """Give ``module`` and each submodule that has its own weights an :class:`AlignDevicesHook`.

    With ``offload``, only one layer's weights are loaded at a time: each submodule loads its
    own tensors from ``weights_map`` (keys are full names under ``module_name``) for its
    forward. A class in ``preload_module_classes`` loads all its submodules' weights at once.
    The top module's hook sends outputs back to the input device when ``module_name`` is ``""``.
    """
    preload = set(preload_module_classes or ())
    _attach_align(
        module,
        execution_device,
        offload,
        weights_map,
        offload_buffers,
        module_name,
        skip_keys,
        preload,
        top=True,
    )


def _attach_align(
    module: torch.nn.Module,
    execution_device: Any,
    offload: bool,
    weights_map: Mapping[str, torch.Tensor] | None,
    offload_buffers: bool,
    module_name: str,
    skip_keys: Any,
    preload: set[str],
    top: bool,
) -> None:
    has_tensors = _has_tensors(module)
    is_preload = type(module).__name__ in preload
    if has_tensors or is_preload or top:
        prefixed = None
        if weights_map is not None:
            prefixed = PrefixedDataset(weights_map, _prefix(module_name))
        hook = AlignDevicesHook(
            execution_device,
            offload=offload and (has_tensors or is_preload),
            io_same_device=top and module_name == "",
            weights_map=prefixed,
            offload_buffers=offload_buffers,
            place_submodules=is_preload,
            skip_keys=skip_keys,
        )
        add_hook_to_module(module, hook, append=True)
    if is_preload:
        return
    for name, child in module.named_children():
        _attach_align(
            child,
            execution_device,
            offload,
            weights_map,
            offload_buffers,
            _prefix(module_name) + name,
            skip_keys,
            preload,
            top=False,
        )


def attach_align_device_hook_on_blocks(
    module: torch.nn.Module,
    execution_device: Any = None,
    offload: bool | Mapping[str, bool] = False,
    weights_map: Mapping[str, torch.Tensor] | None = None,
    offload_buffers: bool = False,
    module_name: str = "",
    skip_keys: str | list[str] | None = None,
    preload_module_classes: Iterable[str] | None = None,
) -> None:
    """Hooks for a model split in blocks: ``execution_device`` and ``offload`` are dicts keyed by
    block name (module or tensor names, as in a device map), or single values for all.

    A block that is not offloaded gets one hook that puts all its weights on its device; an
    offloaded block gets a hook per submodule (see :func:`attach_align_device_hook`), so one
    layer at a time is loaded. The tensors of a module that is not a block itself (its
    children are) are handled by a hook on that module. The top module sends outputs back to
    the input device.
    """
    preload = set(preload_module_classes or ())
    if not isinstance(execution_device, Mapping) and not isinstance(offload, Mapping):
        execution_device = {module_name: execution_device}
        offload = {module_name: offload}
    elif not isinstance(execution_device, Mapping):
        execution_device = dict.fromkeys(offload, execution_device)
    elif not isinstance(offload, Mapping):
        offload = dict.fromkeys(execution_device, offload)
    _attach_blocks(
        module,
        execution_device,
        offload,
        weights_map,
        offload_buffers,
        module_name,
        skip_keys,
        preload,
    )


def _attach_blocks(
    module: torch.nn.Module,
    execution_device: Mapping[str, Any],
    offload: Mapping[str, bool],
    weights_map: Mapping[str, torch.Tensor] | None,
    offload_buffers: bool,
    module_name: str,
    skip_keys: Any,
    preload: set[str],
) -> None:
    is_root = module_name == ""
    if module_name in execution_device:
        device = execution_device[module_name]
        if offload.get(module_name, False):
            _attach_align(
                module,
                device,
                True,
                weights_map,
                offload_buffers,
                module_name,
                skip_keys,
                preload,
                top=True,
            )
        else:
            hook = AlignDevicesHook(
                device, io_same_device=is_root, place_submodules=True, skip_keys=skip_keys
            )
            add_hook_to_module(module, hook, append=True)
        return
    prefix = _prefix(module_name)
    direct = [
        n for n, t in [*module._parameters.items(), *module._buffers.items()] if t is not None
    ]
    mapped = [n for n in direct if prefix + n in execution_device]
    if mapped or is_root:
        device = execution_device[prefix + mapped[0]] if mapped else None
        offloaded = any(offload.get(prefix + n, False) for n in mapped)
        hook = AlignDevicesHook(
            device,
            offload=offloaded,
            io_same_device=is_root,
            weights_map=PrefixedDataset(weights_map, prefix)
            if offloaded and weights_map is not None
            else None,
            offload_buffers=offload_buffers,
            skip_keys=skip_keys,
        )
        add_hook_to_module(module, hook, append=True)
    for name, child in module.named_children():
        _attach_blocks(
            child,
            execution_device,
            offload,
            weights_map,
            offload_buffers,
            prefix + name,
            skip_keys,
            preload,
        )


def _hooks_of(module: torch.nn.Module) -> list[ModelHook]:
    hook = module.__dict__.get(HOOK_ATTR)
    if hook is None:
        return []
    return list(hook.hooks) if isinstance(hook, SequentialHook) else [hook]


def _offload_hook(module: torch.nn.Module) -> AlignDevicesHook | None:
    for hook in _hooks_of(module):
        if isinstance(hook, AlignDevicesHook) and hook.offload:
            return hook
    return None


def has_offloaded_params(module: torch.nn.Module) -> bool:
    """Whether ``module`` has an :class:`AlignDevicesHook` that offloads its weights."""
    return _offload_hook(module) is not None


@contextlib.contextmanager
def align_module_device(
    module: torch.nn.Module, execution_device: int | str | torch.device | None = None
) -> Iterator[None]:
    """Inside the block, ``module``'s own weights are real tensors on its execution device.

    An offloaded module (:func:`has_offloaded_params`) loads its weights as for a forward
    (on ``execution_device`` when given) and drops them again afterwards; any other
    module has its parameters moved to ``execution_device`` and back (no-op without it).
    """
    hook = _offload_hook(module)
    if hook is not None:
        original = hook.execution_device
        if execution_device is not None:
            hook.execution_device = _as_torch_device(execution_device)
        try:
            hook.pre_forward(module)
            yield
        finally:
            hook.post_forward(module, None)
            hook.execution_device = original
        return
    if execution_device is None:
        yield
        return
    previous = {name: p.device for name, p in module.named_parameters(recurse=False)}
    try:
        for name in previous:
            set_module_tensor_to_device(module, name, execution_device)
        yield
    finally:
        for name, device in previous.items():
            set_module_tensor_to_device(module, name, device)


class LayerwiseCastingHook(ModelHook):
    """Store a module's weights in ``storage_dtype`` and run its forward in ``compute_dtype``."""

    def __init__(self, storage_dtype: torch.dtype, compute_dtype: torch.dtype, non_blocking: bool):
        self.storage_dtype = storage_dtype
        self.compute_dtype = compute_dtype
        self.non_blocking = non_blocking

    def init_hook(self, module: torch.nn.Module) -> torch.nn.Module:
        """Cast the weights to the storage dtype."""
        return module.to(dtype=self.storage_dtype, non_blocking=self.non_blocking)

    def pre_forward(
        self, module: torch.nn.Module, *args: Any, **kwargs: Any
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """Cast the weights up to the compute dtype for the forward."""
        module.to(dtype=self.compute_dtype, non_blocking=self.non_blocking)
        return args, kwargs

    def post_forward(self, module: torch.nn.Module, output: Any) -> Any:
        """Cast the weights back down to the storage dtype."""
        module.to(dtype=self.storage_dtype, non_blocking=self.non_blocking)
        return output


CASTING_LAYERS: tuple[type[torch.nn.Module], ...] = (
    torch.nn.Linear,
    torch.nn.Conv1d,
    torch.nn.Conv2d,
    torch.nn.Conv3d,
    torch.nn.ConvTranspose1d,
    torch.nn.ConvTranspose2d,
    torch.nn.ConvTranspose3d,
)
"""Layers :func:`attach_layerwise_casting_hooks` casts (others are searched for such layers)."""


def attach_layerwise_casting_hooks(
    module: torch.nn.Module,
    storage_dtype: torch.dtype,
    compute_dtype: torch.dtype,
    skip_modules_pattern: str | tuple[str, ...] | None = None,
    skip_modules_classes: tuple[type[torch.nn.Module], ...] | None = None,
    non_blocking: bool = False,
) -> None:
    """Give every linear/convolution layer of ``module`` a :class:`LayerwiseCastingHook`.

    Weights are stored in ``storage_dtype`` (e.g. ``torch.float8_e4m3fn``) and cast to
    ``compute_dtype`` for each forward. Modules whose dotted name matches a regular
    expression of ``skip_modules_pattern``, or whose class is in ``skip_modules_classes``,
    are left as they are (with everything under them).
    """
    patterns = (
        (skip_modules_pattern,) if isinstance(skip_modules_pattern, str) else skip_modules_pattern
    )

    def visit(current: torch.nn.Module, name: str) -> None:
        if skip_modules_classes is not None and isinstance(current, skip_modules_classes):
            return
        if patterns is not None and any(re.search(p, name) for p in patterns):
            return
        if isinstance(current, CASTING_LAYERS):
            hook = LayerwiseCastingHook(storage_dtype, compute_dtype, non_blocking)
            add_hook_to_module(current, hook, append=True)
            return
        for child_name, child in current.named_children():
            visit(child, f"{name}.{child_name}" if name else child_name)

    visit(module, "")


__all__ = [
    "AlignDevicesHook",
    "CpuOffload",
    "ModelHook",
    "SequentialHook",
    "UserCpuOffloadHook",
    "add_hook_to_module",
    "attach_align_device_hook",
    "attach_align_device_hook_on_blocks",
    "attach_execution_device_hook",
    "find_device",
    "remove_hook_from_module",
    "remove_hook_from_submodules",
    "LayerwiseCastingHook",
    "attach_layerwise_casting_hooks",
    "align_module_device",
    "has_offloaded_params",
]
