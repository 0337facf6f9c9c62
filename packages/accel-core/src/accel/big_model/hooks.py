"""Big-model hooks (Accelerate's ``accelerate.hooks``) on :mod:`accel.big_model.module_hooks`.

Big-model inference is built on one hook, :class:`AlignDevicesHook`: it moves the inputs to the device where the module runs and, for a module whose weights
live elsewhere (CPU RAM or disk), loads them onto that device for the forward and drops
them after it.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Generator, Iterable, Mapping

import torch

from accel import devices
from accel.big_model.device_map import DeviceLike, device_for
from accel.big_model.modeling import (
    TiedParamsMap,
    check_device_same,
    get_non_persistent_buffers,
    named_module_tensors,
    set_module_tensor_to_device,
)
from accel.big_model.module_hooks import (
    HOOK_ATTR,
    OLD_FORWARD_ATTR,
    TIED_ATTR,
    ModelHook,
    SequentialHook,
    add_hook_to_module,
    remove_hook_from_module,
    remove_hook_from_submodules,
)
from accel.big_model.offload import PrefixedDataset
from accel.distributed.operations import send_to_device
from accel.logging import get_plain_logger
from accel.memory import clear_device_cache

logger = get_plain_logger(__name__)


def find_device(data: object) -> torch.device | None:
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


def _as_torch_device(device: DeviceLike | None) -> torch.device | None:
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
            state dict in CPU RAM or an :class:`~accel.utils.offload.OffloadedWeightsLoader`
            (wrapped in a :class:`~accel.utils.offload.PrefixedDataset`, whose ``dataset``
            PEFT reads).
        offload_buffers: offload persistent buffers too (by default buffers stay on the
            execution device; non-persistent ones always do, a state dict does not hold them).
        place_submodules: handle the tensors of all submodules, not only the module's own.
        skip_keys: keys of keyword arguments / output dicts not to move.
        tied_params_map: ``{data_ptr of a tied weight: {device: tensor already there}}``
            shared by the hooks of a model, so that a tied weight loaded by one module is
            reused by the others instead of being copied again (see
            :func:`~accel.utils.set_module_tensor_to_device`).

    The attributes keep the argument names (PEFT rebuilds a hook from its ``__dict__``), and
    after ``init_hook`` of an offloading hook ``original_devices`` maps every tensor of the
    module to the device it had: ``meta`` marks a weight that lives only in ``weights_map``
    (offloaded to disk), which :meth:`detach_hook` therefore leaves on the meta device.
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
        tied_params_map: TiedParamsMap | None = None,
    ):
        self.execution_device = _as_torch_device(execution_device)
        self.offload = offload
        self.io_same_device = io_same_device
        self.weights_map = weights_map
        self.offload_buffers = offload_buffers
        self.place_submodules = place_submodules
        self.skip_keys = skip_keys
        self.tied_params_map = tied_params_map
        self.input_device: torch.device | None = None
        self.original_devices: dict[str, torch.device] = {}
        self.tied_params_names: set[str] = set()
        """Offloaded tensors that are tied weights (they go through ``tied_params_map``)."""
        self._offloaded: list[str] = []
        """Names loaded from ``weights_map`` before each forward and dropped after it."""
        self._tied_loaded: set[tuple[int, torch.device]] = set()
        """Tied weights this forward put in ``tied_params_map``, removed again after it."""

    def __repr__(self) -> str:
        return (
            f"AlignDevicesHook(execution_device={self.execution_device}, offload={self.offload}, "
            f"io_same_device={self.io_same_device}, offload_buffers={self.offload_buffers}, "
            f"place_submodules={self.place_submodules}, skip_keys={self.skip_keys!r})"
        )

    def init_hook(self, module: torch.nn.Module) -> torch.nn.Module:
        """Offload the weights to the meta device, or move them to the execution device."""
        if self.execution_device is not None and self.execution_device.type == "meta":
            self.tied_params_map = None  # every meta tensor has data_ptr 0: nothing to share
        recurse = self.place_submodules
        params = _names(module.named_parameters(recurse=recurse, remove_duplicate=False))
        buffers = _names(module.named_buffers(recurse=recurse, remove_duplicate=False))
        if not self.offload:
            if self.execution_device is not None:
                for name in [*params, *buffers]:
                    _place(module, name, self.execution_device, self.weights_map)
            return module
        self.original_devices = {**params, **buffers}
        if self.weights_map is None:  # as in Accelerate: offload the module's own weights to RAM
            self.weights_map = {
                name: tensor.detach().to("cpu")
                for name, tensor in named_module_tensors(
                    module, include_buffers=self.offload_buffers, recurse=recurse
                )
            }
        transient = get_non_persistent_buffers(module, recurse=recurse, fqns=True)
        self._offloaded = list(params)
        if self.offload_buffers:
            self._offloaded += [name for name in buffers if name not in transient]
        for name in self._offloaded:
            tensor = _tensor(module, name)
            if self.tied_params_map is not None and tensor.data_ptr() in self.tied_params_map:
                self.tied_params_names.add(name)
            set_module_tensor_to_device(module, name, "meta")
        if self.execution_device is not None:
            # buffers not offloaded (all, or the non-persistent ones) live on the execution device
            staying = buffers if not self.offload_buffers else transient & set(buffers)
            for name in staying:
                _place(module, name, self.execution_device, self.weights_map)
        return module

    def _fp16_statistics(self, name: str, value: torch.Tensor | None) -> torch.Tensor | None:
        """The ``SCB`` statistics stored next to an int8 weight in ``weights_map`` (bitsandbytes)."""
        if value is None or value.dtype != torch.int8 or "weight" not in name:
            return None
        statistics = name.replace("weight", "SCB")
        weights = self.weights_map
        return weights[statistics] if weights is not None and statistics in weights else None

    def pre_forward(
        self, module: torch.nn.Module, *args: object, **kwargs: object
    ) -> tuple[tuple[object, ...], dict[str, object]]:
        """Note the input device, load offloaded weights, move the inputs."""
        if self.io_same_device:
            self.input_device = find_device([args, kwargs])
        if self.offload:
            device = self.execution_device or torch.device("cpu")
            tied = self.tied_params_map
            weights = self.weights_map
            assert weights is not None  # offloading hooks are built with their weights map
            self._tied_loaded = set()
            for name in self._offloaded:
                value = weights[name]
                if tied is not None and value is not None:
                    pointer = value.data_ptr()
                    if name in self.tied_params_names and pointer not in tied:
                        tied[pointer] = {}
                    if pointer in tied and device not in tied[pointer]:
                        self._tied_loaded.add((pointer, device))
                set_module_tensor_to_device(
                    module,
                    name,
                    device,
                    value=value,
                    fp16_statistics=self._fp16_statistics(name, value),
                    tied_params_map=tied,
                )
        if self.execution_device is not None:
            args = send_to_device(args, self.execution_device)
            kwargs = send_to_device(kwargs, self.execution_device, skip_keys=self.skip_keys)
        return args, kwargs

    def post_forward(self, module: torch.nn.Module, output: object) -> object:
        """Drop offloaded weights again; send the output back to the input's device."""
        if self.offload:
            for name in self._offloaded:
                set_module_tensor_to_device(module, name, "meta")
            # forget the tied weights this forward loaded, so their memory can be freed
            for pointer, device in self._tied_loaded:
                if self.tied_params_map is not None and pointer in self.tied_params_map:
                    self.tied_params_map[pointer].pop(device, None)
            self._tied_loaded = set()
        if (
            self.io_same_device
            and self.input_device is not None
            and self.input_device.type != "meta"
        ):
            output = send_to_device(output, self.input_device, skip_keys=self.skip_keys)
        return output

    def detach_hook(self, module: torch.nn.Module) -> torch.nn.Module:
        """Put offloaded tensors back on the devices they came from.

        As in Accelerate, a tensor that was on the meta device when the hook was attached
        (its only copy is in ``weights_map``, e.g. on disk) stays on the meta device.
        """
        if self.offload:
            for name, device in self.original_devices.items():
                if device.type == "meta":
                    continue
                value = None
                if self.weights_map is not None and name in self.weights_map:
                    value = self.weights_map[name]
                set_module_tensor_to_device(
                    module,
                    name,
                    device,
                    value=value,
                    fp16_statistics=self._fp16_statistics(name, value),
                )
        return module


def _tensor(module: torch.nn.Module, name: str) -> torch.Tensor:
    """The parameter or buffer ``name`` (dotted, relative to ``module``)."""
    prefix, _, attr = name.rpartition(".")
    owner = module.get_submodule(prefix) if prefix else module
    tensor = owner._parameters.get(attr)
    if tensor is None:
        tensor = owner._buffers[attr]
    if tensor is None:
        raise KeyError(f"{name} is registered as None")
    return tensor


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
    it (see :func:`accel.cpu_offload_with_hook`). ``execution_device`` defaults to the first
    accelerator (the CPU when there is none).
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
        self, module: torch.nn.Module, *args: object, **kwargs: object
    ) -> tuple[tuple[object, ...], dict[str, object]]:
        """Offload the previous model, bring this one to the execution device with its inputs.

        As in Accelerate, nothing moves when the previous model is already on the CPU or
        this one already on the execution device (then the inputs are left as they are).
        """
        previous = self.prev_module_hook
        if isinstance(previous, UserCpuOffloadHook):
            device = _first_device(previous.model)
            if device is not None and device.type != "cpu":
                previous.offload()
                clear_device_cache()
        device = _first_device(module)
        if device is not None and check_device_same(device, self.execution_device):
            return args, kwargs
        module.to(self.execution_device)
        return send_to_device(args, self.execution_device), send_to_device(
            kwargs, self.execution_device
        )


def _first_device(module: torch.nn.Module) -> torch.device | None:
    """The device of the first parameter of ``module`` (None without parameters)."""
    param = next(iter(module.parameters()), None)
    return None if param is None else param.device


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
    execution_device: DeviceLike | Mapping[str, DeviceLike],
    skip_keys: str | list[str] | None = None,
    preload_module_classes: Iterable[str] | None = None,
    tied_params_map: TiedParamsMap | None = None,
    module_name: str = "",
) -> None:
    """Add a hook moving the inputs to the execution device to every submodule that has weights.

    ``execution_device`` is one device, or a device map ``{module name: device}`` (the longest
    name prefixing a module gives its device). A class in ``preload_module_classes`` gets one
    hook for all its submodules. ``tied_params_map`` is handed to the hooks (see
    :class:`AlignDevicesHook`).
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
        hook = AlignDevicesHook(device, skip_keys=skip_keys, tied_params_map=tied_params_map)
        add_hook_to_module(module, hook, append=True)
    if is_preload:
        return
    for name, child in module.named_children():
        attach_execution_device_hook(
            child,
            execution_device,
            skip_keys,
            preload,
            tied_params_map=tied_params_map,
            module_name=_prefix(module_name) + name,
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
    tied_params_map: TiedParamsMap | None = None,
) -> None:
    """Give ``module`` and each submodule that has its own weights an :class:`AlignDevicesHook`.

    With ``offload``, only one layer's weights are loaded at a time: each submodule loads its
    own tensors from ``weights_map`` (keys are full names under ``module_name``) for its
    forward. A class in ``preload_module_classes`` loads all its submodules' weights at once.
    The top module's hook sends outputs back to the input device when ``module_name`` is ``""``.
    ``tied_params_map`` is shared by all the hooks (see :class:`AlignDevicesHook`).
    """
    options = _AttachOptions(
        offload_buffers, skip_keys, set(preload_module_classes or ()), tied_params_map
    )
    _attach_align(module, execution_device, offload, weights_map, module_name, options, top=True)


class _AttachOptions:
    """The arguments every hook of one attach call shares."""

    def __init__(
        self,
        offload_buffers: bool,
        skip_keys: str | list[str] | None,
        preload: set[str],
        tied_params_map: TiedParamsMap | None,
    ):
        self.offload_buffers = offload_buffers
        self.skip_keys = skip_keys
        self.preload = preload
        self.tied_params_map = tied_params_map


def _attach_align(
    module: torch.nn.Module,
    execution_device: DeviceLike | None,
    offload: bool,
    weights_map: Mapping[str, torch.Tensor] | None,
    module_name: str,
    options: _AttachOptions,
    top: bool,
) -> None:
    has_tensors = _has_tensors(module)
    is_preload = type(module).__name__ in options.preload
    if has_tensors or is_preload or top:
        prefixed = None
        if weights_map is not None:
            prefixed = PrefixedDataset(weights_map, _prefix(module_name))
        hook = AlignDevicesHook(
            execution_device,
            offload=offload and (has_tensors or is_preload),
            io_same_device=top and module_name == "",
            weights_map=prefixed,
            offload_buffers=options.offload_buffers,
            place_submodules=is_preload,
            skip_keys=options.skip_keys,
            tied_params_map=options.tied_params_map,
        )
        add_hook_to_module(module, hook, append=True)
    if is_preload:
        return
    for name, child in module.named_children():
        child_name = _prefix(module_name) + name
        _attach_align(child, execution_device, offload, weights_map, child_name, options, top=False)


def attach_align_device_hook_on_blocks(
    module: torch.nn.Module,
    execution_device: DeviceLike | Mapping[str, DeviceLike] | None = None,
    offload: bool | Mapping[str, bool] = False,
    weights_map: Mapping[str, torch.Tensor] | None = None,
    offload_buffers: bool = False,
    module_name: str = "",
    skip_keys: str | list[str] | None = None,
    preload_module_classes: Iterable[str] | None = None,
    tied_params_map: TiedParamsMap | None = None,
) -> None:
    """Hooks for a model split in blocks: ``execution_device`` and ``offload`` are dicts keyed by
    block name (module or tensor names, as in a device map), or single values for all.

    A block that is not offloaded gets one hook that puts all its weights on its device; an
    offloaded block gets a hook per submodule (see :func:`attach_align_device_hook`), so one
    layer at a time is loaded. The tensors of a module that is not a block itself (its
    children are) are handled by a hook on that module. The top module sends outputs back to
    the input device. ``tied_params_map`` is shared by all the hooks.
    """
    options = _AttachOptions(
        offload_buffers, skip_keys, set(preload_module_classes or ()), tied_params_map
    )
    devices: Mapping[str, DeviceLike | None]
    offloads: Mapping[str, bool]
    if isinstance(execution_device, Mapping):
        devices = execution_device
        offloads = offload if isinstance(offload, Mapping) else dict.fromkeys(devices, offload)
    elif isinstance(offload, Mapping):
        devices, offloads = dict.fromkeys(offload, execution_device), offload
    else:
        devices, offloads = {module_name: execution_device}, {module_name: offload}
    _attach_blocks(module, devices, offloads, weights_map, module_name, options)


def _attach_blocks(
    module: torch.nn.Module,
    execution_device: Mapping[str, DeviceLike | None],
    offload: Mapping[str, bool],
    weights_map: Mapping[str, torch.Tensor] | None,
    module_name: str,
    options: _AttachOptions,
) -> None:
    is_root = module_name == ""
    if module_name in execution_device:
        device = execution_device[module_name]
        if offload.get(module_name, False):
            _attach_align(module, device, True, weights_map, module_name, options, top=True)
        else:
            hook = AlignDevicesHook(
                device,
                io_same_device=is_root,
                place_submodules=True,
                skip_keys=options.skip_keys,
                tied_params_map=options.tied_params_map,
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
            offload_buffers=options.offload_buffers,
            skip_keys=options.skip_keys,
            tied_params_map=options.tied_params_map,
        )
        add_hook_to_module(module, hook, append=True)
    for name, child in module.named_children():
        _attach_blocks(child, execution_device, offload, weights_map, prefix + name, options)


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
) -> Generator[None, None, None]:
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
        self, module: torch.nn.Module, *args: object, **kwargs: object
    ) -> tuple[tuple[object, ...], dict[str, object]]:
        """Cast the weights up to the compute dtype for the forward."""
        module.to(dtype=self.compute_dtype, non_blocking=self.non_blocking)
        return args, kwargs

    def post_forward(self, module: torch.nn.Module, output: object) -> object:
        """Cast the weights back down to the storage dtype."""
        module.to(dtype=self.storage_dtype, non_blocking=self.non_blocking)
        return output


SUPPORTED_PYTORCH_LAYERS_FOR_UPCASTING: tuple[type[torch.nn.Module], ...] = (
    torch.nn.Linear,
    torch.nn.Conv1d,
    torch.nn.Conv2d,
    torch.nn.Conv3d,
    torch.nn.ConvTranspose1d,
    torch.nn.ConvTranspose2d,
    torch.nn.ConvTranspose3d,
)
"""Layers :func:`attach_layerwise_casting_hooks` casts (others are searched for such layers).

Accelerate's ``accelerate.utils.constants.SUPPORTED_PYTORCH_LAYERS_FOR_UPCASTING``."""


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
        if isinstance(current, SUPPORTED_PYTORCH_LAYERS_FOR_UPCASTING):
            hook = LayerwiseCastingHook(storage_dtype, compute_dtype, non_blocking)
            add_hook_to_module(current, hook, append=True)
            return
        for child_name, child in current.named_children():
            visit(child, f"{name}.{child_name}" if name else child_name)

    visit(module, "")


def get_state_dict_offloaded_model(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The full state dict of a model whose weights are partly offloaded, on the CPU.

    Accelerate's ``accelerate.utils.modeling.get_state_dict_offloaded_model``;
    ``Accelerator.save_model`` saves such a model with it (checkpoint code does not import
    big-model code: the caller reads the weights and passes them down).

    Each module whose weights are offloaded (an ``AlignDevicesHook`` with ``offload=True``,
    weights in its ``weights_map``: CPU memory or disk) loads them as for a forward, on the
    CPU, its tensors are taken, and the weights are dropped again; the other tensors are
    the model's own. Tied weights stay one tensor. Needs the whole model in CPU memory.
    As in Accelerate, a tensor still on the meta device afterwards (offloaded nowhere) is
    left out, with a warning naming it.
    """
    own = model.state_dict(keep_vars=True)
    loaded: dict[int, torch.Tensor] = {}  # id of the meta tensor -> its loaded value
    for _name, module in model.named_modules():
        if not has_offloaded_params(module):
            continue
        before = module.state_dict(keep_vars=True)
        with align_module_device(module, "cpu"):
            after = module.state_dict()
            for key, tensor in before.items():
                value = after.get(key)
                if tensor.device.type == "meta" and value is not None:
                    if value.device.type != "meta":
                        loaded.setdefault(id(tensor), value.detach().to("cpu"))
    state_dict: dict[str, torch.Tensor] = {}
    missing = []
    for key, tensor in own.items():
        if tensor.device.type == "meta":
            value = loaded.get(id(tensor))
            if value is None:
                missing.append(key)
                continue
            state_dict[key] = value
        else:
            state_dict[key] = tensor.detach().to("cpu")
    if missing:
        logger.warning(
            "These tensors are on the meta device and offloaded nowhere, so they are not in "
            "the state dict: %s",
            missing,
        )
    return state_dict


def get_state_dict_from_offload(
    module: torch.nn.Module,
    module_name: str,
    state_dict: dict[str, torch.Tensor],
    device_to_put_offload: int | str | torch.device = "cpu",
) -> dict[str, torch.Tensor]:
    """Fill ``state_dict`` with the tensors of ``module``, loaded if it is offloaded.

    Accelerate's ``accelerate.utils.modeling.get_state_dict_from_offload``. ``module_name``
    is the key of one of ``module``'s tensors (``"linear1.weight"``): each tensor of
    ``module`` whose key under the same prefix (``"linear1."``) is already in ``state_dict``
    gets its value there. An offloaded module (:func:`has_offloaded_params`) loads its
    weights onto ``device_to_put_offload`` for this; any other module's tensors are taken
    where they are. Returns ``state_dict``, changed in place.
    """
    prefix = module_name.rpartition(".")[0]
    device = device_to_put_offload if has_offloaded_params(module) else None
    with align_module_device(module, device):
        for key, tensor in module.state_dict().items():
            full_key = f"{prefix}.{key}" if prefix else key
            if full_key in state_dict:
                state_dict[full_key] = tensor.detach()
    return state_dict


__all__ = [
    "HOOK_ATTR",
    "OLD_FORWARD_ATTR",
    "TIED_ATTR",
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
    "SUPPORTED_PYTORCH_LAYERS_FOR_UPCASTING",
    "get_state_dict_offloaded_model",
    "get_state_dict_from_offload",
]
