"""Big-model inference: build a model without memory, load a checkpoint into it piece by piece,
and spread it over the accelerators, the CPU and the disk.

    with init_empty_weights():
        model = MyModel(...)                      # no memory: every weight on the meta device
    model = load_checkpoint_and_dispatch(model, checkpoint="ckpt/", device_map="auto")
    output = model(inputs)                        # layers on CPU/disk are brought in as they run
"""

from __future__ import annotations

import contextlib
import functools
import gc
import os
import tempfile
from collections.abc import Generator, Iterable, Mapping
from typing import Any

import torch

from accel.big_model.device_map import (
    Device,
    DeviceLike,
    check_device_map,
    device_for,
    get_balanced_memory,
    infer_auto_device_map,
    normalize_device,
)
from accel.big_model.device_map import (
    main_device as _main_device,
)
from accel.big_model.hooks import (
    CpuOffload,
    UserCpuOffloadHook,
    _default_execution_device,
    add_hook_to_module,
    attach_align_device_hook,
    attach_align_device_hook_on_blocks,
    attach_layerwise_casting_hooks,
)
from accel.big_model.modeling import (
    find_tied_parameters,
    retie_parameters,
    set_module_tensor_to_device,
)
from accel.big_model.module_hooks import TIED_ATTR
from accel.big_model.offload import (
    OffloadedWeightsLoader,
    OffloadEntry,
    load_offloaded_weight,
    offload_state_dict,
    offload_weight,
    read_offload_index,
    save_offload_index,
)
from accel.checkpoint.files import FileReader, checkpoint_files
from accel.errors import CheckpointError
from accel.logging import get_plain_logger
from accel.progress import progress_bar

logger = get_plain_logger(__name__)

DEVICE_MAP_STRATEGIES = ("auto", "balanced", "balanced_low_0", "sequential")
"""The device-map names :func:`load_checkpoint_and_dispatch` accepts instead of a dict."""

# -- empty models ----------------------------------------------------------------------------


@contextlib.contextmanager
def init_empty_weights(include_buffers: bool | None = None) -> Generator[None, None, None]:
    """Build models with no memory for their weights: every parameter lands on the meta device.

    Buffers stay real (on the CPU) unless ``include_buffers=True``. Load the weights afterwards
    with :func:`load_checkpoint_and_dispatch` or :func:`load_checkpoint_in_model`.
    """
    with init_on_device(torch.device("meta"), include_buffers=bool(include_buffers)):
        yield


@contextlib.contextmanager
def init_on_device(
    device: int | str | torch.device, include_buffers: bool | None = None
) -> Generator[None, None, None]:
    """Build models with their parameters (and buffers with ``include_buffers``) on ``device``.

    With ``include_buffers``, every tensor created in the block defaults to ``device`` too.
    """
    device = torch.device(device) if not isinstance(device, int) else torch.device("cuda", device)
    original_parameter = torch.nn.Module.register_parameter
    original_buffer = torch.nn.Module.register_buffer

    def register_parameter(
        module: torch.nn.Module, name: str, param: torch.nn.Parameter | None
    ) -> None:
        original_parameter(module, name, param)
        param = module._parameters.get(name)
        if param is not None and param.device != device:
            kwargs = dict(param.__dict__)
            kwargs["requires_grad"] = param.requires_grad
            cls = type(param)
            try:
                module._parameters[name] = cls(param.to(device), **kwargs)
            except TypeError:
                module._parameters[name] = torch.nn.Parameter(
                    param.to(device), requires_grad=param.requires_grad
                )

    def register_buffer(
        module: torch.nn.Module, name: str, tensor: torch.Tensor | None, persistent: bool = True
    ) -> None:
        original_buffer(module, name, tensor, persistent=persistent)
        buffer = module._buffers.get(name)
        if buffer is not None and buffer.device != device:
            module._buffers[name] = buffer.to(device)

    # patched for the block and restored after it (the point of this context manager)
    torch.nn.Module.register_parameter = register_parameter  # ty: ignore[invalid-assignment]
    if include_buffers:
        torch.nn.Module.register_buffer = register_buffer  # ty: ignore[invalid-assignment]
    try:
        with device if include_buffers else contextlib.nullcontext():
            yield
    finally:
        torch.nn.Module.register_parameter = original_parameter  # type: ignore[method-assign]
        torch.nn.Module.register_buffer = original_buffer  # type: ignore[method-assign]


def _remember_ties(model: torch.nn.Module) -> None:
    """Record the tied groups, so removing the hooks ties them again (offloading unties them)."""
    tied = find_tied_parameters(model)
    if tied:
        model.__dict__[TIED_ATTR] = tied


# -- offloading a whole model ----------------------------------------------------------------


def cpu_offload(
    model: torch.nn.Module,
    execution_device: int | str | torch.device | None = None,
    offload_buffers: bool = False,
    state_dict: Mapping[str, torch.Tensor] | None = None,
    preload_module_classes: Iterable[str] | None = None,
) -> torch.nn.Module:
    """Keep the weights in CPU RAM; each layer is copied to ``execution_device`` for its forward.

    Only one layer's weights are on the execution device at a time. ``execution_device``
    defaults, as in Accelerate, to the device of the model's first parameter (the first
    accelerator for a model without parameters).
    """
    if execution_device is None:
        first = next(iter(model.parameters()), None)
        execution_device = first.device if first is not None else _default_execution_device()
    if state_dict is None:
        state_dict = {name: t.to("cpu") for name, t in model.state_dict(keep_vars=True).items()}
        state_dict = {name: t.detach() for name, t in state_dict.items()}
    _remember_ties(model)
    attach_align_device_hook(
        model,
        execution_device=execution_device,
        offload=True,
        weights_map=state_dict,
        offload_buffers=offload_buffers,
        preload_module_classes=preload_module_classes,
    )
    return model


def cpu_offload_with_hook(
    model: torch.nn.Module,
    execution_device: int | str | torch.device | None = None,
    prev_module_hook: UserCpuOffloadHook | None = None,
) -> tuple[torch.nn.Module, UserCpuOffloadHook]:
    """Keep ``model`` on the CPU; move it whole to ``execution_device`` when it runs, and leave it
    there until the next model of a chain (given this hook as ``prev_module_hook``) runs.

    Returns the model and a handle whose ``offload()`` sends it back to the CPU.
    """
    hook = CpuOffload(execution_device=execution_device, prev_module_hook=prev_module_hook)
    add_hook_to_module(model, hook, append=True)
    return model, UserCpuOffloadHook(model, hook)


def disk_offload(
    model: torch.nn.Module,
    offload_dir: str | os.PathLike,
    execution_device: int | str | torch.device | None = None,
    offload_buffers: bool = False,
    preload_module_classes: Iterable[str] | None = None,
) -> torch.nn.Module:
    """Write the weights to ``offload_dir`` (memory-mapped files with an index) and free them;
    each layer is loaded to ``execution_device`` for its forward.

    An ``offload_dir`` that already has an ``index.json`` is used as it is.
    """
    if not read_offload_index(offload_dir):
        offload_state_dict(offload_dir, model.state_dict(keep_vars=True))
    execution_device = execution_device or _default_execution_device()
    _remember_ties(model)
    attach_align_device_hook(
        model,
        execution_device=execution_device,
        offload=True,
        weights_map=OffloadedWeightsLoader(save_folder=offload_dir),
        offload_buffers=offload_buffers,
        preload_module_classes=preload_module_classes,
    )
    return model


# -- dispatching -----------------------------------------------------------------------------


def _guard_moves(model: torch.nn.Module) -> None:
    """Make ``model.to(...)`` and friends fail clearly on a model spread over devices."""

    def refuse(name: str, *args: object, **kwargs: object) -> None:
        raise RuntimeError(
            f"model.{name}() on a model dispatched over several devices (or offloaded) would "
            "break its placement; remove the hooks first with "
            "accel.hooks.remove_hook_from_module(model, recurse=True)"
        )

    names = ("to", "cuda", "cpu", "xpu", "npu", "half", "float", "bfloat16")
    for name in names:
        model.__dict__[name] = functools.partial(refuse, name)
    model.__dict__["_accel_move_guard"] = names


def dispatch_model(
    model: torch.nn.Module,
    device_map: Mapping[str, DeviceLike],
    main_device: int | str | torch.device | None = None,
    state_dict: Mapping[str, torch.Tensor] | None = None,
    offload_dir: str | os.PathLike | None = None,
    offload_index: Mapping[str, OffloadEntry] | None = None,
    offload_buffers: bool = False,
    skip_keys: str | list[str] | None = None,
    preload_module_classes: Iterable[str] | None = None,
    force_hooks: bool = False,
) -> torch.nn.Module:
    """Place ``model`` as ``device_map`` says and add the hooks that make its forward work.

    Entries on an accelerator are moved there; entries on ``"cpu"`` (when an accelerator is
    used) or ``"disk"`` are offloaded: their weights stay in RAM / in ``offload_dir`` and are
    loaded onto the main device (``main_device``, default the fastest device of the map) for
    each forward. Outputs come back on the device of the inputs. A model all on one device is
    simply moved there (unless ``force_hooks``).
    """
    device_map = {name: normalize_device(device) for name, device in device_map.items()}
    check_device_map(model, device_map)
    devices = set(device_map.values())
    # torch types Module.__setattr__ for tensors and modules; any attribute may be set
    model.hf_device_map = dict(device_map)  # ty: ignore[invalid-assignment]
    if not force_hooks and len(devices) == 1 and "disk" not in devices:
        device = next(iter(devices))
        meta = [n for n, t in model.state_dict(keep_vars=True).items() if t.device.type == "meta"]
        if meta:
            raise ValueError(
                f"{len(meta)} weights (e.g. {meta[0]}) are still on the meta device: load a "
                "checkpoint first (accel.load_checkpoint_in_model)"
            )
        _move_whole(model, device)
        return model

    main = normalize_device(main_device) if main_device is not None else _main_device(device_map)
    execution = {name: (main if d in ("cpu", "disk") else d) for name, d in device_map.items()}
    offload = {name: d in ("cpu", "disk") and d != main for name, d in device_map.items()}
    # A module whose own tensors are mapped to several devices is offloaded as a whole.
    owners: dict[str, bool] = {}
    tensor_names = {n for n, _ in model.named_parameters(remove_duplicate=False)}
    tensor_names |= {n for n, _ in model.named_buffers(remove_duplicate=False)}
    for name in device_map:
        if name in tensor_names:
            owner = name.rpartition(".")[0]
            owners[owner] = owners.get(owner, False) or offload[name]
    for name in device_map:
        if name in tensor_names and owners[name.rpartition(".")[0]]:
            offload[name] = True

    _remember_ties(model)
    _move_tied_once(model, device_map, execution, offload)
    weights_map = None
    if any(offload.values()):
        weights_map = _offloaded_weights(
            model, device_map, offload, state_dict, offload_dir, offload_index, offload_buffers
        )
    attach_align_device_hook_on_blocks(
        model,
        execution_device=execution,
        offload=offload,
        weights_map=weights_map,
        offload_buffers=offload_buffers,
        skip_keys=skip_keys,
        preload_module_classes=preload_module_classes,
    )
    if len(devices) > 1 or any(offload.values()):
        _guard_moves(model)
    return model


def _move_tied_once(
    model: torch.nn.Module,
    device_map: Mapping[str, Device],
    execution: Mapping[str, Device],
    offload: Mapping[str, bool],
) -> None:
    """Move each tied group kept on one device there once, so it is not copied per owner."""
    for group in find_tied_parameters(model):
        entries = [_entry_of(name, device_map) for name in group]
        if any(offload[entry] for entry in entries):
            continue
        devices = {execution[entry] for entry in entries}
        if len(devices) != 1 or model.get_parameter(group[0]).device.type == "meta":
            continue
        set_module_tensor_to_device(model, group[0], devices.pop())
        retie_parameters(model, [group])


def _move_whole(model: torch.nn.Module, device: Device) -> None:
    if device in ("cpu", "mps"):
        model.to(device)
    else:
        from accel.big_model.modeling import _index_device

        model.to(_index_device(device) if isinstance(device, int) else device)


def _offloaded_weights(
    model: torch.nn.Module,
    device_map: Mapping[str, Device],
    offload: Mapping[str, bool],
    state_dict: Mapping[str, torch.Tensor] | None,
    offload_dir: str | os.PathLike | None,
    offload_index: Mapping[str, OffloadEntry] | None,
    offload_buffers: bool,
) -> OffloadedWeightsLoader:
    """The weights offloaded entries load from: RAM for CPU entries, ``offload_dir`` for disk ones.

    Weights already in ``state_dict`` or in the offload index are used as they are; the others
    are taken from the model (written to ``offload_dir`` for disk entries).
    """
    index = dict(offload_index) if offload_index is not None else {}
    if offload_dir is not None and offload_index is None:
        index = read_offload_index(offload_dir)
    in_ram: dict[str, torch.Tensor] = dict(state_dict or {})
    to_disk: dict[str, torch.Tensor] = {}
    tensors: list[tuple[str, torch.Tensor]] = list(model.named_parameters(remove_duplicate=False))
    if offload_buffers:
        tensors += list(model.named_buffers(remove_duplicate=False))
    for name, tensor in tensors:
        entry = _entry_of(name, device_map)
        if not offload[entry] or name in in_ram or name in index:
            continue
        if tensor.device.type == "meta":
            raise ValueError(
                f"{name} is offloaded by the device map but has no data: it is on the meta "
                "device and not in the offload index"
                + ("" if offload_dir else " (no offload_dir was given)")
            )
        if device_map[entry] == "disk":
            to_disk[name] = tensor.detach()
        else:
            in_ram[name] = tensor.detach().to("cpu")
    if to_disk:
        if offload_dir is None:
            raise ValueError(
                "the device map puts weights on 'disk': pass offload_dir (offload_folder) to say "
                "where to write them"
            )
        offload_state_dict(offload_dir, to_disk)
        index = read_offload_index(offload_dir)
    return OffloadedWeightsLoader(state_dict=in_ram, save_folder=offload_dir, index=index)


def _entry_of(name: str, device_map: Mapping[str, object]) -> str:
    while name not in device_map:
        if not name:
            raise KeyError(name)
        name = name.rpartition(".")[0]
    return name


# -- reading checkpoints ---------------------------------------------------------------------


def _in_modules(name: str, modules: Iterable[str]) -> bool:
    parts = name.split(".")
    for module in modules:
        if module in parts or name == module or name.startswith(f"{module}."):
            return True
    return False


def _as_dtype(dtype: str | torch.dtype | None) -> torch.dtype | None:
    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    value = getattr(torch, str(dtype).replace("torch.", ""), None)
    if not isinstance(value, torch.dtype):
        raise ValueError(f"unknown dtype {dtype!r}")
    return value


def load_checkpoint_in_model(
    model: torch.nn.Module,
    checkpoint: str | os.PathLike,
    device_map: Mapping[str, DeviceLike] | None = None,
    offload_folder: str | os.PathLike | None = None,
    dtype: str | torch.dtype | None = None,
    offload_state_dict: bool = False,
    offload_buffers: bool = False,
    keep_in_fp32_modules: list[str] | None = None,
    strict: bool = False,
) -> None:
    """Load ``checkpoint`` into ``model`` (which may be empty, on the meta device), in place.

    ``checkpoint`` is a weights file (``.safetensors``, or ``.bin``/``.pt`` read with
    ``torch.load(weights_only=True)``: a file holding anything but tensors is refused), the
    index JSON of a sharded checkpoint, or a folder holding either. Each weight goes to its
    device in ``device_map`` (default: where the model's tensor is, the CPU for meta tensors);
    weights mapped to ``"disk"`` are written to ``offload_folder`` (safetensors weights are
    referenced in place) and left on the meta device. Floating weights are cast to ``dtype``
    (modules named in ``keep_in_fp32_modules`` stay float32), else to the model's dtype.
    ``offload_state_dict`` stages CPU weights of ``.bin`` shards on disk while loading, so at
    most one shard is in RAM at a time. Tied weights stay tied. ``strict`` raises on missing
    or unexpected keys; otherwise they are logged.
    """
    dtype = _as_dtype(dtype)
    keep_fp32 = list(keep_in_fp32_modules or [])
    if device_map is not None:
        device_map = {name: normalize_device(d) for name, d in device_map.items()}
        check_device_map(model, device_map)
        if "disk" in device_map.values() and offload_folder is None:
            raise ValueError(
                "the device map puts weights on 'disk': pass offload_folder=... to say where"
            )
    files, aliases = checkpoint_files(checkpoint)
    tied = find_tied_parameters(model)
    group_of = {name: i for i, group in enumerate(tied) for name in group}
    loaded_groups: set[int] = set()
    model_tensors = dict(model.state_dict(keep_vars=True))
    buffers = {n for n, _ in model.named_buffers(remove_duplicate=False)}
    expected = set(model_tensors)
    loaded: set[str] = set()
    unexpected: list[str] = []
    offload_index: dict[str, OffloadEntry] = {}
    staging = tempfile.mkdtemp(prefix="accel-state-") if offload_state_dict else None
    staging_index: dict[str, OffloadEntry] = {}

    def target_of(name: str) -> DeviceLike:
        if device_map is not None:
            device = device_for(name, device_map)
            if device == "disk" and name in buffers and not offload_buffers:
                return "cpu"
            return device
        current = model_tensors[name].device
        return "cpu" if current.type == "meta" else current

    def dtype_of(name: str, stored: torch.dtype) -> torch.dtype:
        if not stored.is_floating_point:
            return stored
        if dtype is not None:
            return torch.float32 if keep_fp32 and _in_modules(name, keep_fp32) else dtype
        current = model_tensors[name].dtype
        return current if current.is_floating_point else stored

    try:
        for path in progress_bar(files, "Loading checkpoint shards", unit="shard"):
            with FileReader(path) as reader:
                file_aliases = {**aliases, **reader.aliases()}
                targets: dict[str, list[str]] = {}
                for alias, target in file_aliases.items():
                    targets.setdefault(target, []).append(alias)
                for key in reader.keys():
                    names = [key, *targets.get(key, [])]
                    for name in names:
                        if name not in expected:
                            if name == key:
                                unexpected.append(name)
                            continue
                        group = group_of.get(name)
                        if group is not None:
                            if group in loaded_groups:
                                loaded.add(name)
                                continue
                            loaded_groups.add(group)
                        _load_one(
                            model,
                            reader,
                            key,
                            name,
                            target_of(name),
                            dtype_of(name, reader.dtype(key)),
                            offload_folder,
                            offload_index,
                            staging,
                            staging_index,
                        )
                        loaded.add(name)
            if not reader.is_safetensors:
                gc.collect()
        if staging is not None:
            for name, info in staging_index.items():
                tensor = load_offloaded_weight(os.path.join(staging, f"{name}.dat"), info)
                set_module_tensor_to_device(model, name, "cpu", value=tensor.clone())
    finally:
        if staging is not None:
            import shutil

            shutil.rmtree(staging, ignore_errors=True)

    for group in tied:
        if group_of[group[0]] in loaded_groups:
            loaded.update(group)
    _retie(model, tied, offload_index)
    if offload_index:
        assert offload_folder is not None  # 'disk' entries need one (checked above)
        save_offload_index(offload_index, offload_folder)
    missing = sorted(expected - loaded)
    if strict and (missing or unexpected):
        raise CheckpointError(
            f"checkpoint {os.fspath(checkpoint)} does not match the model: "
            f"missing {missing[:10]}, unexpected {unexpected[:10]}"
        )
    if missing:
        logger.warning(
            "%d weights of the model are not in the checkpoint (e.g. %s)",
            len(missing),
            ", ".join(missing[:5]),
        )
    if unexpected:
        logger.warning(
            "%d weights of the checkpoint %s were not used when initializing %s: they are not "
            "in the model (e.g. %s)",
            len(unexpected),
            os.fspath(checkpoint),
            type(model).__name__,
            ", ".join(unexpected[:5]),
        )


def _load_one(
    model: torch.nn.Module,
    reader: FileReader,
    key: str,
    name: str,
    device: DeviceLike,
    dtype: torch.dtype,
    offload_folder: str | os.PathLike | None,
    offload_index: dict[str, OffloadEntry],
    staging: str | None,
    staging_index: dict[str, OffloadEntry],
) -> None:
    """Read checkpoint tensor ``key`` into model tensor ``name`` on ``device`` as ``dtype``."""
    if device == "disk":
        if reader.is_safetensors and reader.dtype(key) == dtype:
            shape = list(reader._context.get_slice(key).get_shape())
            offload_index[name] = {
                "safetensors_file": os.path.abspath(reader.path),
                "weight_name": key,
                "dtype": str(dtype).replace("torch.", ""),
                "shape": shape,
            }
        else:
            assert offload_folder is not None  # 'disk' entries need one (checked by the caller)
            offload_weight(reader.get(key).to(dtype), name, offload_folder, offload_index)
        set_module_tensor_to_device(model, name, "meta", dtype=dtype)
        return
    if staging is not None and device == "cpu" and not reader.is_safetensors:
        offload_weight(reader.get(key).to(dtype), name, staging, staging_index)
        set_module_tensor_to_device(model, name, "meta", dtype=dtype)
        return
    set_module_tensor_to_device(model, name, device, value=reader.get(key), dtype=dtype)


def _retie(
    model: torch.nn.Module, tied: list[list[str]], offload_index: dict[str, OffloadEntry]
) -> None:
    """Point every name of a tied group at one parameter (the one that was loaded)."""
    for group in tied:
        params = [model.get_parameter(name) for name in group]
        real = [p for p in params if p.device.type != "meta"]
        first = group[params.index(real[0])] if real else group[0]
        order = [first] + [n for n in group if n != first]
        retie_parameters(model, [order])
        indexed = next((offload_index[n] for n in group if n in offload_index), None)
        if indexed is not None:
            file_of = next(n for n in group if n in offload_index)
            for name in group:
                if name not in offload_index:
                    entry = indexed.copy()
                    if "safetensors_file" not in entry:
                        entry.setdefault("file", f"{file_of}.dat")
                    offload_index[name] = entry


def load_checkpoint_and_dispatch(
    model: torch.nn.Module,
    checkpoint: str | os.PathLike,
    device_map: str | Mapping[str, DeviceLike] | None = None,
    max_memory: Mapping[Any, int | str] | None = None,  # keys: DeviceLike
    no_split_module_classes: list[str] | None = None,
    offload_folder: str | os.PathLike | None = None,
    offload_buffers: bool = False,
    dtype: str | torch.dtype | None = None,
    offload_state_dict: bool | None = None,
    skip_keys: str | list[str] | None = None,
    preload_module_classes: list[str] | None = None,
    force_hooks: bool = False,
    strict: bool = False,
    keep_in_fp32_modules: list[str] | None = None,
) -> torch.nn.Module:
    """Load ``checkpoint`` into ``model`` and spread it as ``device_map`` says; return the model.

    ``device_map`` is a dict ``{name: device}`` or a strategy: ``"auto"``/``"balanced"`` (even
    over the accelerators, then CPU, then disk), ``"balanced_low_0"`` (keep the first
    accelerator light) or ``"sequential"`` (fill each device in turn). ``max_memory`` caps each
    device, e.g. ``{0: "10GiB", "cpu": "30GiB"}``; ``no_split_module_classes`` names classes
    never split across devices (blocks with residual connections). See
    :func:`load_checkpoint_in_model` for the other arguments.
    """
    dtype = _as_dtype(dtype)
    if isinstance(device_map, str):
        if device_map not in DEVICE_MAP_STRATEGIES:
            raise ValueError(
                f"device_map={device_map!r}: use a dict or one of {', '.join(DEVICE_MAP_STRATEGIES)}"
            )
        if device_map != "sequential":
            max_memory = get_balanced_memory(
                model,
                max_memory=max_memory,
                no_split_module_classes=no_split_module_classes,
                dtype=dtype,
                low_zero=device_map == "balanced_low_0",
            )
        device_map = infer_auto_device_map(
            model,
            max_memory=max_memory,
            no_split_module_classes=no_split_module_classes,
            dtype=dtype,
            offload_buffers=offload_buffers,
        )
    if offload_state_dict is None:
        offload_state_dict = device_map is not None and "disk" in device_map.values()
    load_checkpoint_in_model(
        model,
        checkpoint,
        device_map=device_map,
        offload_folder=offload_folder,
        dtype=dtype,
        offload_state_dict=offload_state_dict,
        offload_buffers=offload_buffers,
        keep_in_fp32_modules=keep_in_fp32_modules,
        strict=strict,
    )
    if device_map is None:
        return model
    return dispatch_model(
        model,
        device_map=device_map,
        offload_dir=offload_folder,
        offload_buffers=offload_buffers,
        skip_keys=skip_keys,
        preload_module_classes=preload_module_classes,
        force_hooks=force_hooks,
    )


__all__ = [
    "attach_layerwise_casting_hooks",
    "cpu_offload",
    "cpu_offload_with_hook",
    "disk_offload",
    "dispatch_model",
    "init_empty_weights",
    "init_on_device",
    "load_checkpoint_and_dispatch",
    "load_checkpoint_in_model",
]
