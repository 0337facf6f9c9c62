"""Where each part of a model goes: memory budgets, module sizes, and the device-map planner.

A device map is a dict ``{module or tensor name: device}``; a device is an accelerator index
(``0``, ``1``, ...), ``"mps"``, ``"cpu"`` or ``"disk"``. Every parameter and buffer of the
model must be covered by exactly one entry (the longest name that prefixes it).

The planner is pure bookkeeping over sizes: it never touches a device, so maps for GPU
indices can be computed (and tested) on a machine without GPUs by passing ``max_memory``.
"""

from __future__ import annotations

import logging
import math
import warnings
from collections import deque
from collections.abc import Iterable, Mapping
from typing import Any

import torch

from accel import catalog
from accel.big_model.modeling import find_tied_parameters
from accel.memory import parse_size

logger = logging.getLogger(__name__)

Device = int | str
_ACCELERATOR_KINDS = tuple(catalog.DEVICE_KINDS)
_OTHER_DEVICES = ("mps",)


# -- devices and budgets ------------------------------------------------------------------


def normalize_device(device: Any) -> Device:
    """``0`` / ``"0"`` / ``"cuda:0"`` / ``torch.device("cuda", 0)`` -> ``0``; ``"cpu"``, ``"disk"``, ``"mps"`` kept."""
    if isinstance(device, torch.device):
        if device.type in _ACCELERATOR_KINDS:
            return device.index or 0
        return device.type
    if isinstance(device, bool):
        raise ValueError(f"{device!r} is not a device")
    if isinstance(device, int):
        if device < 0:
            raise ValueError(f"device index {device} is negative")
        return device
    if isinstance(device, str):
        text = device.strip().lower()
        if text.isdigit():
            return int(text)
        kind, _, index = text.partition(":")
        if kind in _ACCELERATOR_KINDS:
            return int(index or 0)
        if kind in ("cpu", "disk", "meta") or kind in _OTHER_DEVICES:
            return kind
    raise ValueError(
        f"unknown device {device!r}: use an accelerator index (0, 1, ...), 'cuda:N', 'mps', "
        "'cpu' or 'disk'"
    )


def _device_rank(device: Device) -> tuple[int, int]:
    if isinstance(device, int):
        return (0, device)
    if device in _OTHER_DEVICES:
        return (1, _OTHER_DEVICES.index(device))
    return {"cpu": (2, 0), "meta": (3, 0), "disk": (4, 0)}[device]


def _to_bytes(device: Device, value: int | float | str) -> int:
    if isinstance(value, float):
        return int(value)
    try:
        return parse_size(value)
    except ValueError:
        raise ValueError(
            f"max_memory[{device!r}]={value!r}: use a number of bytes or a string like "
            "'10GiB', '500MB' or '200KB'"
        ) from None


def _detected_memory() -> dict[Device, int]:
    import psutil

    memory: dict[Device, int] = {}
    for kind in _ACCELERATOR_KINDS:
        backend = getattr(torch, kind, None)
        available = getattr(backend, "is_available", None)
        if available is None or not available():
            continue
        for index in range(backend.device_count()):
            try:
                memory[index] = int(backend.mem_get_info(index)[0])
            except Exception:  # some backends have no mem_get_info
                memory[index] = int(backend.get_device_properties(index).total_memory)
        break
    if not memory and torch.backends.mps.is_available():
        memory["mps"] = int(psutil.virtual_memory().available)
    memory["cpu"] = int(psutil.virtual_memory().available)
    return memory


def get_max_memory(max_memory: Mapping[Any, int | str] | None = None) -> dict[Device, int]:
    """Memory budget in bytes per device, fastest device first (indices, ``mps``, ``cpu``, ``disk``).

    Without ``max_memory``: the free memory of every accelerator and the available RAM. Given a
    dict such as ``{0: "10GiB", "cpu": "30GiB"}`` or ``{"cpu": "200KB", "disk": "1GB"}``: sizes
    parsed to bytes and keys normalised (``"cuda:1"`` -> ``1``). Indices are not checked against
    the hardware here, so a map can be planned for GPUs this machine does not have.
    """
    if max_memory is None:
        return _detected_memory()
    result: dict[Device, int] = {}
    for key, value in max_memory.items():
        device = normalize_device(key)
        if device == "meta":
            raise ValueError("max_memory cannot budget the meta device")
        result[device] = _to_bytes(device, value)
    return dict(sorted(result.items(), key=lambda item: _device_rank(item[0])))


# -- sizes -----------------------------------------------------------------------------------


def _as_dtype(dtype: str | torch.dtype | None) -> torch.dtype | None:
    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    value = getattr(torch, str(dtype).replace("torch.", ""), None)
    if not isinstance(value, torch.dtype):
        raise ValueError(f"unknown dtype {dtype!r}")
    return value


def _tensor_size(
    name: str,
    tensor: torch.Tensor,
    dtype: torch.dtype | None,
    special: Mapping[str, torch.dtype],
) -> int:
    if name in special:
        item = torch.empty((), dtype=special[name]).element_size()
    elif dtype is not None and tensor.is_floating_point():
        item = torch.empty((), dtype=dtype).element_size()
    else:
        item = tensor.element_size()
    return tensor.numel() * item


def _prefixes(name: str) -> Iterable[str]:
    yield ""
    parts = name.split(".")
    for i in range(1, len(parts) + 1):
        yield ".".join(parts[:i])


def compute_module_sizes(
    model: torch.nn.Module,
    dtype: str | torch.dtype | None = None,
    special_dtypes: Mapping[str, str | torch.dtype] | None = None,
    buffers_only: bool = False,
) -> dict[str, int]:
    """Bytes held by every module and tensor of ``model``, by name (``""`` is the whole model).

    ``dtype`` is the dtype floating tensors will be loaded in; ``special_dtypes`` overrides it
    for single tensors. A tied weight is counted once, in the first module that holds it.
    """
    dtype = _as_dtype(dtype)
    special = {k: _as_dtype(v) for k, v in (special_dtypes or {}).items()}
    sizes: dict[str, int] = dict.fromkeys((name for name, _ in model.named_modules()), 0)
    tensors: list[tuple[str, torch.Tensor]] = list(model.named_buffers())
    if not buffers_only:
        tensors = list(model.named_parameters()) + tensors
    for name, tensor in tensors:
        size = _tensor_size(name, tensor, dtype, special)
        for prefix in _prefixes(name):
            sizes[prefix] = sizes.get(prefix, 0) + size
    return sizes


def _direct_tensors(module: torch.nn.Module) -> list[tuple[str, torch.Tensor]]:
    items = [(n, t) for n, t in module._parameters.items() if t is not None]
    return items + [(n, t) for n, t in module._buffers.items() if t is not None]


def _splittable(module: torch.nn.Module, no_split: set[str]) -> bool:
    return len(module._modules) > 0 and type(module).__name__ not in no_split


def _atoms(
    module: torch.nn.Module, name: str, no_split: set[str]
) -> Iterable[tuple[str, torch.nn.Module | torch.Tensor]]:
    """The smallest pieces the planner places whole: unsplittable modules and direct tensors."""
    if not _splittable(module, no_split):
        yield name, module
        return
    prefix = f"{name}." if name else ""
    for tensor_name, tensor in _direct_tensors(module):
        yield prefix + tensor_name, tensor
    for child_name, child in module.named_children():
        yield from _atoms(child, prefix + child_name, no_split)


def get_max_layer_size(
    model: torch.nn.Module,
    module_sizes: Mapping[str, int],
    no_split_module_classes: Iterable[str] | None = None,
) -> tuple[int, list[str]]:
    """Size of the largest piece the planner cannot split, and the names of the pieces that size."""
    best, names = 0, []
    for name, _ in _atoms(model, "", set(no_split_module_classes or ())):
        size = module_sizes.get(name, 0)
        if size > best:
            best, names = size, [name]
        elif size == best:
            names.append(name)
    return best, names


def get_balanced_memory(
    model: torch.nn.Module,
    max_memory: Mapping[Any, int | str] | None = None,
    no_split_module_classes: Iterable[str] | None = None,
    dtype: str | torch.dtype | None = None,
    special_dtypes: Mapping[str, str | torch.dtype] | None = None,
    low_zero: bool = False,
) -> dict[Device, int]:
    """Budgets that spread ``model`` evenly over the accelerators of ``max_memory``.

    Each accelerator gets about an equal share (plus one average layer of slack), the last one
    its whole budget. With ``low_zero`` the first accelerator only takes what fits nowhere
    else, leaving it room for ``generate`` and the like. ``cpu`` and ``disk`` are unchanged.
    """
    budgets = get_max_memory(max_memory)
    indices = [d for d in budgets if isinstance(d, int) and budgets[d] > 0]
    if len(indices) <= 1:
        return budgets
    sizes = compute_module_sizes(model, dtype=dtype, special_dtypes=special_dtypes)
    total = sizes[""]
    atoms = list(_atoms(model, "", set(no_split_module_classes or ())))
    mean_atom = total / max(len(atoms), 1)
    sharing = indices[1:] if low_zero else indices
    share = math.ceil(total / len(sharing) + mean_atom)
    balanced = dict(budgets)
    for index in sharing[:-1]:
        balanced[index] = min(budgets[index], share)
    if low_zero:
        elsewhere = sum(balanced[i] for i in sharing)
        balanced[indices[0]] = min(budgets[indices[0]], max(0, total - elsewhere))
    return balanced


# -- the planner -----------------------------------------------------------------------------


def infer_auto_device_map(
    model: torch.nn.Module,
    max_memory: Mapping[Any, int | str] | None = None,
    no_split_module_classes: Iterable[str] | None = None,
    dtype: str | torch.dtype | None = None,
    special_dtypes: Mapping[str, str | torch.dtype] | None = None,
    verbose: bool = False,
    clean_result: bool = True,
    offload_buffers: bool = False,
) -> dict[str, Device]:
    """Plan a device map: fill the fastest device first, then the next, then ``cpu``, then ``disk``.

    Modules are placed whole when they fit; one that does not fit is split into its children
    (and its own tensors) unless its class is in ``no_split_module_classes``, in which case it
    moves on to the next device. ``"disk"`` is always available as the last resort. Tied
    parameters end up on one device. When part of the model is offloaded, the main device
    (first accelerator, or the CPU) keeps room for the largest layer, which is loaded there to
    run (and, unless ``offload_buffers``, for the buffers, which stay on it).
    """
    budgets = get_max_memory(max_memory)
    budgets.pop("meta", None)
    if "disk" not in budgets:
        budgets["disk"] = 0
    devices = list(budgets)
    no_split = set(no_split_module_classes or ())
    sizes = compute_module_sizes(model, dtype=dtype, special_dtypes=special_dtypes)
    tied = find_tied_parameters(model)
    main = next((d for d in devices if d != "disk"), "disk")

    plan = _plan(model, budgets, devices, no_split, sizes, tied, reserve=0, verbose=False)
    if any(_offloaded(device, main) for device in plan.values()):
        max_layer, _ = get_max_layer_size(model, sizes, no_split)
        buffers = 0 if offload_buffers else compute_module_sizes(model, buffers_only=True)[""]
        plan = _plan(
            model,
            budgets,
            devices,
            no_split,
            sizes,
            tied,
            reserve=max_layer + buffers,
            verbose=verbose,
        )
    elif verbose:
        plan = _plan(model, budgets, devices, no_split, sizes, tied, reserve=0, verbose=True)
    return clean_device_map(plan, model) if clean_result else plan


def _offloaded(device: Device, main: Device) -> bool:
    return device != main and device in ("cpu", "disk")


def _plan(
    model: torch.nn.Module,
    budgets: Mapping[Device, int],
    devices: list[Device],
    no_split: set[str],
    sizes: Mapping[str, int],
    tied: list[list[str]],
    reserve: int,
    verbose: bool,
) -> dict[str, Device]:
    """One greedy pass of the planner (see :func:`infer_auto_device_map`)."""
    main = devices[0]
    remaining = {d: budgets[d] for d in devices}
    remaining[main] = max(0, remaining[main] - reserve) if main != "disk" else 0
    group_of = {name: i for i, group in enumerate(tied) for name in group}
    home: dict[int, Device] = {}
    plan: dict[str, Device] = {}
    position = 0

    def say(message: str) -> None:
        if verbose:
            print(message)
            logger.info(message)

    def tied_inside(name: str) -> set[int]:
        if not group_of:
            return set()
        prefix = f"{name}." if name else ""
        return {g for n, g in group_of.items() if n == name or n.startswith(prefix)}

    units: deque[tuple[str, Any]] = deque([("", model)])
    while units:
        name, obj = units.popleft()
        device = devices[position]
        size = sizes.get(name, 0)
        groups = tied_inside(name)
        homes = {home[g] for g in groups if g in home}
        splittable = isinstance(obj, torch.nn.Module) and _splittable(obj, no_split)
        if homes and homes != {device}:
            if splittable:
                units.extendleft(reversed(_children_units(obj, name)))
                continue
            target = next(iter(homes))
            say(f"{name or 'the model'} goes to device {target!r} with the weights it is tied to")
            plan[name] = target
            remaining[target] = remaining[target] - size if target != "disk" else 0
            continue
        if device == "disk" or size <= remaining[device]:
            plan[name] = device
            if device != "disk":
                remaining[device] -= size
            for g in groups:
                home.setdefault(g, device)
            continue
        if splittable:
            say(f"{name or 'the model'} ({size} bytes) does not fit on {device!r}: splitting it")
            units.extendleft(reversed(_children_units(obj, name)))
            continue
        say(f"{name or 'the model'} ({size} bytes) does not fit on {device!r}: next device")
        position += 1
        units.appendleft((name, obj))
    return plan


def _children_units(module: torch.nn.Module, name: str) -> list[tuple[str, Any]]:
    prefix = f"{name}." if name else ""
    units: list[tuple[str, Any]] = [(prefix + n, t) for n, t in _direct_tensors(module)]
    units += [(prefix + n, child) for n, child in module.named_children()]
    return units


def clean_device_map(device_map: Mapping[str, Device], model: torch.nn.Module) -> dict[str, Device]:
    """The same placement with as few entries as possible: a module whose contents all go to one
    device gets a single entry."""
    mixed = object()
    memo: dict[str, Any] = {}

    def device_of(name: str, module: torch.nn.Module) -> Any:
        if name in device_map:
            return device_map[name]
        if name in memo:
            return memo[name]
        prefix = f"{name}." if name else ""
        found: set[Any] = set()
        for tensor_name, _ in _direct_tensors(module):
            found.add(device_map.get(prefix + tensor_name, mixed))
        for child_name, child in module.named_children():
            found.add(device_of(prefix + child_name, child))
        result = found.pop() if len(found) == 1 else mixed
        memo[name] = result
        return result

    cleaned: dict[str, Device] = {}

    def emit(name: str, module: torch.nn.Module) -> None:
        device = device_of(name, module)
        if device is not mixed:
            cleaned[name] = device
            return
        prefix = f"{name}." if name else ""
        for tensor_name, _ in _direct_tensors(module):
            if prefix + tensor_name in device_map:
                cleaned[prefix + tensor_name] = device_map[prefix + tensor_name]
        for child_name, child in module.named_children():
            emit(prefix + child_name, child)

    emit("", model)
    return cleaned


def device_for(name: str, device_map: Mapping[str, Any]) -> Any:
    """The device ``device_map`` gives to the tensor or module ``name`` (longest matching entry)."""
    while True:
        if name in device_map:
            return device_map[name]
        if not name:
            raise KeyError(name)
        name = name.rpartition(".")[0]


def check_device_map(model: torch.nn.Module, device_map: Mapping[str, Any]) -> None:
    """Raise ValueError unless every parameter and buffer of ``model`` is covered by ``device_map``;
    warn about entries that name no module or tensor of the model (they are ignored)."""
    names = {n for n, _ in model.named_parameters(remove_duplicate=False)}
    names |= {n for n, _ in model.named_buffers(remove_duplicate=False)}
    modules = {n for n, _ in model.named_modules(remove_duplicate=False)}
    unknown = [k for k in device_map if k not in names and k not in modules]
    if unknown:  # as in Accelerate: a warning, the entries are ignored
        warnings.warn(
            f"device_map names {', '.join(map(repr, unknown[:5]))} which the model does not have: "
            "those entries are ignored",
            stacklevel=2,
        )
    missing = []
    for name in names:
        try:
            device_for(name, device_map)
        except KeyError:
            missing.append(name)
    if missing:
        raise ValueError(
            "device_map does not place "
            + ", ".join(sorted(missing)[:10])
            + (" ..." if len(missing) > 10 else "")
            + ": add entries for them (or a parent module, or '' for the whole model)"
        )


def main_device(device_map: Mapping[str, Any]) -> Device:
    """The fastest device used by ``device_map`` (where offloaded layers run): an accelerator, else the CPU."""
    devices = {normalize_device(d) for d in device_map.values()}
    devices.discard("disk")
    if not devices:
        return "cpu"
    return min(devices, key=_device_rank)


def check_tied_parameters_on_same_device(
    tied_params: list[list[str]], device_map: dict[str, Any]
) -> None:
    """Warn for every group of tied parameters that ``device_map`` puts on several devices."""
    for group in tied_params:
        placed = {name: device_for(name, device_map) for name in group}
        if len(set(map(str, placed.values()))) > 1:
            warnings.warn(
                f"tied parameters are on different devices: {placed}; put them on one device",
                stacklevel=2,
            )
