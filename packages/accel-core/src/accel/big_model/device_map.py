"""Where each part of a model goes: memory budgets, module sizes, and the device-map planner.

A device map is a dict ``{module or tensor name: device}``; a device is an accelerator index
(``0``, ``1``, ...), ``"mps"``, ``"cpu"`` or ``"disk"``. Every parameter and buffer of the
model must be covered by exactly one entry (the longest name that prefixes it).

The planner is pure bookkeeping over sizes: it never touches a device, so maps for GPU
indices can be computed (and tested) on a machine without GPUs by passing ``max_memory``.
"""

from __future__ import annotations

import warnings
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeGuard, TypeVar, cast

import torch

from accel import catalog
from accel.big_model.modeling import find_tied_parameters
from accel.logging import get_plain_logger
from accel.sizes import parse_size
from accel.types import CustomDtype

logger = get_plain_logger(__name__)

Device = int | str
DeviceLike = int | str | torch.device
"""A device as a device map or ``max_memory`` may name it: ``0``, ``"cuda:0"``, ``"cpu"``, ``"disk"``, a ``torch.device``."""
V = TypeVar("V")
_ACCELERATOR_KINDS = tuple(catalog.DEVICE_KINDS)
_OTHER_DEVICES = ("mps",)


# -- devices and budgets ------------------------------------------------------------------


def normalize_device(device: object) -> Device:
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
        if backend is None or available is None or not available():
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


def get_max_memory(
    max_memory: Mapping[Any, int | str]
    | None = None,  # keys: DeviceLike (Mapping keys are invariant)
) -> dict[Device, int]:
    """Memory budget in bytes per device, fastest device first (indices, ``mps``, ``cpu``, ``disk``).

    Without ``max_memory``: the free memory of every accelerator and the available RAM. Given a
    dict such as ``{0: "10GiB", "cpu": "30GiB"}`` or ``{"cpu": "200KB", "disk": "1GB"}``: sizes
    parsed to bytes and keys normalised (``"cuda:1"`` -> ``1``) in the returned dict. As in
    Accelerate, the string sizes of the caller's dict are also replaced by their number of
    bytes in place (transformers compares its values with numbers afterwards). Indices are
    not checked against the hardware here, so a map can be planned for GPUs this machine does
    not have.
    """
    if max_memory is None:
        return _detected_memory()
    result: dict[Device, int] = {}
    for key, value in max_memory.items():
        device = normalize_device(key)
        if device == "meta":
            raise ValueError("max_memory cannot budget the meta device")
        result[device] = _to_bytes(device, value)
    if isinstance(max_memory, dict):
        for key in list(max_memory):
            if isinstance(max_memory[key], str):
                max_memory[key] = result[normalize_device(key)]
    return dict(sorted(result.items(), key=lambda item: _device_rank(item[0])))


# -- sizes -----------------------------------------------------------------------------------


def _as_dtype(dtype: str | torch.dtype | CustomDtype | None) -> torch.dtype | CustomDtype | None:
    if dtype is None or isinstance(dtype, (torch.dtype, CustomDtype)):
        return dtype
    if str(dtype).lower() in CustomDtype._value2member_map_:  # "int4", "fp8", "int2"
        return CustomDtype(str(dtype).lower())
    value = getattr(torch, str(dtype).replace("torch.", ""), None)
    if not isinstance(value, torch.dtype):
        raise ValueError(f"unknown dtype {dtype!r}")
    return value


_CUSTOM_BYTES = {CustomDtype.FP8: 1, CustomDtype.INT4: 1 / 2, CustomDtype.INT2: 1 / 4}
"""Bytes per element of the quantized types torch has no dtype for."""


def _element_bytes(dtype: torch.dtype | CustomDtype) -> int | float:
    """Bytes per element as Accelerate counts them: ``bool`` is one bit, 8-bit floats one byte,
    :class:`~accel.utils.CustomDtype` ``INT4`` half a byte."""
    if isinstance(dtype, CustomDtype):
        return _CUSTOM_BYTES[dtype]
    if dtype == torch.bool:
        return 1 / 8
    return dtype.itemsize


def _loaded_bytes(
    name: str,
    tensor: torch.Tensor,
    dtype: torch.dtype | CustomDtype | None,
    special: Mapping[str, torch.dtype | CustomDtype],
) -> int | float:
    """Bytes ``tensor`` takes once loaded: ``special`` dtype, else the smaller of ``dtype`` and its
    own for floating tensors (integers and bools are never converted)."""
    if name in special:
        return tensor.numel() * _element_bytes(special[name])
    own = _element_bytes(tensor.dtype)
    if (
        dtype is None
        or tensor.dtype == torch.bool
        or not (tensor.is_floating_point() or tensor.is_complex())
    ):
        return tensor.numel() * own
    return tensor.numel() * min(own, _element_bytes(dtype))


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
) -> defaultdict[str, float]:
    """Bytes held by every module and tensor of ``model``, by name (``""`` is the whole model).

    ``dtype`` is the dtype floating tensors are loaded in (a tensor already smaller keeps its
    size; integer and bool tensors are never converted, a bool counts one bit);
    ``special_dtypes`` overrides it for single tensors. A tied weight is counted once, under
    its first name. Names the model does not have read as 0 (a ``defaultdict``).
    """
    load_dtype = _as_dtype(dtype)
    special = {k: d for k, v in (special_dtypes or {}).items() if (d := _as_dtype(v)) is not None}
    sizes: defaultdict[str, float] = defaultdict(int)
    tensors: list[tuple[str, torch.Tensor]] = []
    if not buffers_only:
        tensors += list(model.named_parameters())
    tensors += list(model.named_buffers())
    for name, tensor in tensors:
        size = _loaded_bytes(name, tensor, load_dtype, special)
        for prefix in _prefixes(name):
            sizes[prefix] += size
    return sizes


def compute_module_total_buffer_size(
    model: torch.nn.Module,
    dtype: str | torch.dtype | None = None,
    special_dtypes: Mapping[str, str | torch.dtype] | None = None,
) -> float:
    """Bytes of all the buffers of ``model`` (see :func:`compute_module_sizes`)."""
    return compute_module_sizes(model, dtype, special_dtypes, buffers_only=True).get("", 0)


Entry = tuple[str, "torch.nn.Module | torch.Tensor"]
"""One item the planner places: ``(name, module or tensor)``."""


def _split_entries(module: torch.nn.Module, name: str) -> list[Entry]:
    """What a module that is split is replaced by: its own parameters, then its children.

    As in Accelerate, a split module's own buffers get no entry of their own here (the
    planner covers them afterwards, see :func:`_cover_buffers`).
    """
    prefix = f"{name}." if name else ""
    entries: list[Entry] = [(prefix + n, p) for n, p in module.named_parameters(recurse=False)]
    return entries + [(prefix + n, child) for n, child in module.named_children()]


def _root_entries(model: torch.nn.Module) -> list[Entry]:
    """The first items to place: the model's own parameters, its children, its own buffers."""
    entries = _split_entries(model, "")
    return entries + list(model.named_buffers(recurse=False))


def _class_names(classes: str | Iterable[str] | None) -> list[str]:
    """``no_split_module_classes`` as a list: one class name, or any iterable (transformers
    passes a set), or None."""
    if classes is None:
        return []
    if isinstance(classes, str):
        return [classes]
    return list(classes)


def _can_split(obj: object, no_split: Iterable[str]) -> TypeGuard[torch.nn.Module]:
    return (
        isinstance(obj, torch.nn.Module)
        and len(obj._modules) > 0
        and type(obj).__name__ not in no_split
    )


def get_max_layer_size(
    modules: torch.nn.Module | Sequence[Entry],
    module_sizes: Mapping[str, float],
    no_split_module_classes: Iterable[str] | None = None,
) -> tuple[float, list[str]]:
    """Size of the largest layer, and the names of the layers that size.

    A layer is a tensor, a module without children, or a module whose class is in
    ``no_split_module_classes``; bigger modules are searched. ``modules`` is a list of
    ``(name, module or tensor)`` (as in Accelerate) or a model (its own tensors and children).
    """
    no_split = set(_class_names(no_split_module_classes))
    todo = _root_entries(modules) if isinstance(modules, torch.nn.Module) else list(modules)
    best, names = 0, []
    while todo:
        name, obj = todo.pop(0)
        if isinstance(obj, torch.nn.Module) and _can_split(obj, no_split):
            prefix = f"{name}." if name else ""
            todo[:0] = [(prefix + n, child) for n, child in obj.named_children()]
            continue
        size = module_sizes.get(name, 0)
        if size > best:
            best, names = size, [name]
        elif size == best:
            names.append(name)
    return best, names


def _module_leaves(names: Iterable[str]) -> list[str]:
    """The names (not ``""``) that no other name extends with one more component."""
    names = list(names)
    parents = {n.rsplit(".", 1)[0] for n in names if "." in n}
    return [n for n in names if n and n not in parents]


def get_balanced_memory(
    model: torch.nn.Module,
    max_memory: Mapping[Any, int | str]
    | None = None,  # keys: DeviceLike (Mapping keys are invariant)
    no_split_module_classes: Iterable[str] | None = None,
    dtype: str | torch.dtype | None = None,
    special_dtypes: Mapping[str, str | torch.dtype] | None = None,
    low_zero: bool = False,
) -> dict[Device, int]:
    """Budgets that spread ``model`` evenly over the accelerators of ``max_memory`` (as Accelerate).

    Every accelerator but the last gets ``model size / number of accelerators`` plus a margin
    of 1.25 times the larger of the biggest ``no_split_module_classes`` block and the mean
    leaf-module size (never more than its own budget); the last keeps its whole budget. With
    ``low_zero`` the first accelerator only takes what does not fit on the others, leaving
    it room for ``generate`` and the like. ``cpu`` and ``disk`` are unchanged. With one
    accelerator and no ``max_memory``, 10% of it is kept free.
    """
    detected = max_memory is None
    budgets = get_max_memory(max_memory)
    indices = sorted(d for d in budgets if isinstance(d, int) and budgets[d] > 0)
    if not indices:
        return budgets
    if len(indices) == 1:
        low_zero = False
        if detected:
            budgets[indices[0]] = int(budgets[indices[0]] * 0.9)
    sizes = compute_module_sizes(model, dtype=dtype, special_dtypes=special_dtypes)
    total = sizes[""]
    per_device = total // (len(indices) - 1 if low_zero else len(indices))

    block = 0
    no_split = _class_names(no_split_module_classes)
    if no_split:
        first_size: dict[str, float] = {}
        for name, size in sizes.items():
            if not name:
                continue
            kind = type(_get(model, name)).__name__
            if kind in no_split:
                first_size.setdefault(kind, size)
                if len(first_size) == len(set(no_split)):
                    break
        block = max(first_size.values(), default=0)
    tensors = set(_module_leaves(sizes))
    layers = _module_leaves(n for n in sizes if n not in tensors)
    mean_layer = int(sum(sizes[n] for n in layers) / max(len(layers), 1))
    per_device += int(1.25 * max(block, mean_layer))

    for index in indices[:-1]:
        cap = budgets.get(0, 0) if low_zero and index == 0 else per_device
        budgets[index] = int(min(cap, budgets[index]))
    if low_zero:
        others = sum(budgets.get(i, 0) for i in range(1, len(indices)))
        budgets[0] = int(min(max(0, total - others), budgets[0]))
    return budgets


def _get(model: torch.nn.Module, name: str) -> object:
    obj: object = model
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def calculate_maximum_sizes(model: torch.nn.Module) -> tuple[float, tuple[float, list[str]]]:
    """``(model size, (largest layer size, its names))``; layers as in :func:`get_max_layer_size`,
    with the model's ``_no_split_modules`` (transformers models) kept whole."""
    sizes = compute_module_sizes(model)
    no_split = getattr(model, "_no_split_modules", None) or []
    return sizes[""], get_max_layer_size(_root_entries(model), sizes, no_split)


def _holder(name: str, entries: Iterable[Entry]) -> Entry | None:
    """The entry of ``entries`` whose name is a dotted prefix of ``name`` (``None`` if none)."""
    return next((e for e in entries if name.startswith(e[0] + ".")), None)


def get_module_size_with_ties(
    tied_params: list[str],
    module_size: int,
    module_sizes: Mapping[str, float],
    modules_to_treat: list[tuple[str, torch.nn.Module]],
) -> tuple[float, list[str], list[torch.nn.Module]]:
    """A module's size with the modules holding its tied weights: Accelerate's formula.

    Accelerate's ``accelerate.utils.modeling.get_module_size_with_ties``. For each name of
    ``tied_params`` (weights tied to the module, held elsewhere), its holder is the entry of
    ``modules_to_treat`` (``(name, module)`` pairs) whose name prefixes it (``holder + "."``);
    the size adds, per tied name, the holder's size minus that tied weight's own size (both
    from ``module_sizes``). Returns ``(size with ties, holder names, holder modules)``, one
    holder per tied name in order; ``(module_size, [], [])`` without tied names. A tied name
    that no entry holds is a :class:`ValueError`. (:func:`infer_auto_device_map` counts a
    shared weight once in its sizes, so it adds the holders' sizes without subtracting.)
    """
    if not tied_params:
        return module_size, [], []
    names: list[str] = []
    modules: list[torch.nn.Module] = []
    size = module_size
    for tied in tied_params:
        holder = _holder(tied, modules_to_treat)
        if holder is None:
            raise ValueError(f"no module of modules_to_treat holds the tied parameter {tied!r}")
        names.append(holder[0])
        modules.append(cast(torch.nn.Module, holder[1]))  # a holder of tensors is a module
        size += module_sizes[holder[0]] - module_sizes[tied]
    return size, names, modules


# -- the planner -----------------------------------------------------------------------------


def infer_auto_device_map(
    model: torch.nn.Module,
    max_memory: Mapping[Any, int | str]
    | None = None,  # keys: DeviceLike (Mapping keys are invariant)
    no_split_module_classes: Iterable[str] | None = None,
    dtype: str | torch.dtype | None = None,
    special_dtypes: Mapping[str, str | torch.dtype] | None = None,
    verbose: bool = False,
    clean_result: bool = True,
    offload_buffers: bool = False,
    fallback_allocation: bool = False,
) -> dict[str, Device]:
    """Plan a device map: fill the accelerators in order, then ``cpu``, then ``disk`` (the maps
    Accelerate's function of the same name gives).

    The model's parts are taken in order and placed whole when they fit; one that does not
    fit is split into its own parameters and children, unless it is a tensor, has no children
    or its class is in ``no_split_module_classes``: then the next device is tried. ``"disk"``
    takes whatever is left. The main devices (the first accelerator and ``cpu``, or ``mps``
    alone, or ``cpu`` alone) always keep room for the largest layer still to place: an
    offloaded layer is loaded there to run. A part whose weights are tied to parts not placed
    yet is placed together with them (their size counted), or one of them is split first.
    With ``fallback_allocation``, a device that would stay empty takes the first smaller part
    that fits. Unless ``offload_buffers``, the buffers of the parts offloaded to the CPU or
    the disk stay on an accelerator: a warning says so when no accelerator has room for them.
    ``clean_result`` merges the entries of a module whose parts all go to one device.
    """
    budgets = get_max_memory(max_memory)
    budgets.pop("meta", None)
    planner = _Planner(
        model,
        budgets,
        no_split=_class_names(no_split_module_classes),
        sizes=compute_module_sizes(model, dtype=dtype, special_dtypes=special_dtypes),
        tied=[sorted(group) for group in find_tied_parameters(model)],
        verbose=verbose,
        fallback_allocation=fallback_allocation,
    )
    plan = planner.run()
    if clean_result:
        plan = clean_device_map(plan)
    _cover_buffers(model, plan)

    if not offload_buffers:
        buffer_sizes: dict[Device, float] = defaultdict(int)
        for name, device in planner.placed_modules:
            buffer_sizes[device] += compute_module_total_buffer_size(
                cast(torch.nn.Module, _get(model, name)) if name else model,
                dtype=dtype,
                special_dtypes=special_dtypes,
            )
        offloaded = buffer_sizes.get("cpu", 0) + buffer_sizes.get("disk", 0)
        accelerators = [d for d in budgets if d not in ("cpu", "disk")]
        fits = any(budgets[d] >= offloaded + planner.used.get(d, 0) for d in accelerators)
        if offloaded > 0 and accelerators and not fits:
            warnings.warn(
                f"the buffers of the offloaded layers ({offloaded} bytes) stay on an accelerator "
                "but fit in none of them next to the weights planned there: pass "
                "offload_buffers=True if that runs out of memory",
                stacklevel=2,
            )
    if planner.too_small:
        logger.info(
            "no part of the model fits on %s: insufficient memory (bytes needed for the next "
            "part: %s); give them more memory to use them",
            ", ".join(map(repr, planner.too_small)),
            planner.too_small,
        )
    return plan


class _Planner:
    """One greedy pass over the model's parts (the algorithm of :func:`infer_auto_device_map`)."""

    def __init__(
        self,
        model: torch.nn.Module,
        budgets: dict[Device, int],
        no_split: list[str],
        sizes: Mapping[str, float],
        tied: list[list[str]],
        verbose: bool,
        fallback_allocation: bool,
    ):
        self.budgets = budgets
        self.devices: list[Device] = [*budgets, *(["disk"] if "disk" not in budgets else [])]
        accelerators = [d for d in self.devices if d not in ("cpu", "disk")]
        if "mps" in accelerators:
            self.main_devices: list[Device] = ["mps"]
        elif accelerators:
            self.main_devices = [accelerators[0], "cpu"]
        else:
            self.main_devices = ["cpu"]
        self.no_split = no_split
        self.sizes = sizes
        self.tied = tied
        self.verbose = verbose
        self.fallback_allocation = fallback_allocation
        self.todo: list[Entry] = _root_entries(model)
        self.used: dict[Device, float] = dict.fromkeys(self.devices, 0)
        self.placed_modules: list[tuple[str, Device]] = []
        """Modules placed whole, with their device: their buffers go with them (the tied
        holders placed along are not counted here, as in Accelerate)."""
        self.too_small: dict[Device, float] = {}
        """Devices that got nothing: the size they would have needed."""
        self.largest, self.largest_names = get_max_layer_size(self.todo, sizes, no_split)
        self.fallback_tried: dict[Device, set[str]] = {}
        """Parts already taken out by the fallback for a device (tried again, they would loop)."""

    def say(self, message: str) -> None:
        if self.verbose:
            print(message)

    def refresh_largest(self) -> None:
        modules = [(n, m) for n, m in self.todo if isinstance(m, torch.nn.Module)]
        self.largest, self.largest_names = get_max_layer_size(modules, self.sizes, self.no_split)

    def partners(self, name: str) -> list[str]:
        """Tied names outside ``name`` whose group also has a name inside it."""
        prefix = f"{name}."
        outside: list[str] = []
        for group in self.tied:
            inside = [n == name or n.startswith(prefix) for n in group]
            if any(inside) and not all(inside):
                outside += [n for n, i in zip(group, inside) if not i]
        return outside

    @staticmethod
    def holders(partners: list[str], entries: list[Entry]) -> list[Entry]:
        """For each tied name, the entry of ``entries`` that contains it (skipped if none)."""
        found = []
        for partner in partners:
            entry = _holder(partner, entries)
            if entry is not None:
                found.append(entry)
        return found

    def size_with(self, name: str, partners: list[str], holders: list[Entry]) -> float:
        """``name``'s size plus, for each tied name outside it, the size of its holder.

        A tied weight is counted once in the sizes (under its first name), so nothing is
        subtracted. (Accelerate subtracts the tied name's size, which undercounts the shared
        weight when ``name`` holds its second name: then a device could be overfilled.)
        """
        size = self.sizes.get(name, 0)
        for partner in partners:
            holder = _holder(partner, holders)
            if holder is not None:
                size += self.sizes.get(holder[0], 0)
        return size

    def run(self) -> dict[str, Device]:
        plan: dict[str, Device] = {}
        position = 0
        while self.todo:
            name, obj = self.todo.pop(0)
            self.largest_names = [
                n for n in self.largest_names if n != name and not n.startswith(name + ".")
            ]
            if not self.largest_names:
                self.refresh_largest()
            size = self.sizes.get(name, 0)
            partners = self.partners(name)
            holders = self.holders(partners, self.todo)
            with_ties = self.size_with(name, partners, holders)
            device = self.devices[position]
            reserve = self.largest if device in self.main_devices else 0
            limit = None if device == "disk" else self.budgets[device] - reserve

            if limit is None or self.used[device] + with_ties <= limit:
                together = [n for n, _ in holders]
                self.say(
                    f"{name or 'the model'} ({with_ties} bytes"
                    + (f", with {together}" if together else "")
                    + f") goes to {device!r}"
                )
                self.used[device] += with_ties
                plan[name] = device
                if isinstance(obj, torch.nn.Module):
                    self.placed_modules.append((name, device))
                for holder_name, _holder in holders:
                    index = next((i for i, e in enumerate(self.todo) if e[0] == holder_name), None)
                    if index is not None:
                        self.todo.pop(index)
                    plan[holder_name] = device
                continue

            if (
                holders
                and self.used[device] + size <= limit
                and self.split_a_holder((name, obj), holders)
            ):
                continue

            if self.used[device] + size >= limit and _can_split(obj, self.no_split):
                self.say(f"{name or 'the model'} ({size} bytes) does not fit on {device!r}: split")
                self.todo[:0] = _split_entries(obj, name)
                self.refresh_largest()
                continue

            if self.fallback_allocation and self.used[device] == 0 and device != "disk":
                room = self.budgets[device] - max(self.largest, with_ties)
                found = self.fallback(room, self.fallback_tried.setdefault(device, set()))
                if found is not None:
                    self.say(f"{found[0]} goes to {device!r} instead, which would stay empty")
                    self.todo[:0] = [found, (name, obj)]
                    continue

            self.say(f"{name or 'the model'} ({with_ties} bytes) does not fit on {device!r}")
            if self.used[device] == 0:
                self.too_small[device] = with_ties + reserve
            self.used[device] += reserve
            position += 1
            self.todo.insert(0, (name, obj))
        self.used = {d: m for d, m in self.used.items() if m > 0}
        return plan

    def split_a_holder(self, current: Entry, holders: list[Entry]) -> bool:
        """Split the first splittable tied holder (the current part is retried first)."""
        for holder_name, holder in holders:
            if not _can_split(holder, self.no_split):
                continue
            index = next((i for i, e in enumerate(self.todo) if e[0] == holder_name), None)
            if index is None:
                continue
            self.say(f"{current[0]} fits without its tied {holder_name}: split {holder_name}")
            self.todo[index : index + 1] = _split_entries(holder, holder_name)
            self.todo.insert(0, current)
            self.refresh_largest()
            return True
        return False

    def fallback(self, room: int | float, tried: set[str]) -> Entry | None:
        """Take out of the to-do list the first part (searching depth first) that fits ``room``.

        A part in ``tried`` (taken out before for this device, and which then did not fit
        with its tied weights) is not taken again: the device would never be left.
        """
        if room < 0:
            return None
        search = list(self.todo)
        while search:
            name, obj = search.pop(0)
            partners = self.partners(name)
            fits = self.size_with(name, partners, self.holders(partners, search)) <= room
            if fits and name not in tried:
                tried.add(name)
                break
            if _can_split(obj, self.no_split):
                search[:0] = _split_entries(obj, name)
        else:
            return None
        # open the ancestors of the part found, so it is an item of the to-do list itself
        parts = name.split(".")
        for depth in range(1, len(parts)):
            parent = ".".join(parts[:depth])
            index = next((i for i, e in enumerate(self.todo) if e[0] == parent), None)
            if index is not None:
                ancestor = cast(torch.nn.Module, self.todo[index][1])  # holds ``name``
                self.todo[index : index + 1] = _split_entries(ancestor, parent)
        index = next(i for i, e in enumerate(self.todo) if e[0] == name)
        return self.todo.pop(index)


def _cover_buffers(model: torch.nn.Module, plan: dict[str, Device]) -> None:
    """Give a device to the own buffers of split modules, which the plan leaves out.

    Such a buffer goes where the first planned part of its module goes. (Accelerate leaves
    them out of its maps; accel's maps cover every tensor, so ``check_device_map`` passes.)
    """
    for module_name, module in model.named_modules():
        prefix = f"{module_name}." if module_name else ""
        for buffer_name, buffer in module._buffers.items():
            if buffer is None:
                continue
            full = prefix + buffer_name
            try:
                device_for(full, plan)
            except KeyError:
                device = next((d for k, d in plan.items() if k.startswith(prefix)), None)
                if device is not None:
                    plan[full] = device


def clean_device_map(device_map: dict[str, Device], module_name: str = "") -> dict[str, Device]:
    """Merge the entries under ``module_name`` (the whole map by default) that all name one
    device into one entry for their module, recursively; changes and returns ``device_map``.

    E.g. ``{"a.x": 0, "b": 1, "a.y": 0}`` becomes ``{"b": 1, "a": 0}``; an entry that is
    alone under its module stays as it is. As in Accelerate, a merged entry moves to the end
    of the map (``model.hf_device_map`` shows that order); the children of a module are
    visited in the order of their first entry (Accelerate's order there depends on the hash
    seed).
    """
    if isinstance(module_name, torch.nn.Module):  # accel's former (device_map, model) form
        module_name = ""
    prefix = f"{module_name}." if module_name else ""
    under = [k for k in device_map if k.startswith(prefix) and k != module_name]
    if len(under) > 1 and len({device_map[k] for k in under}) == 1:
        device = device_map[under[0]]
        for key in under:
            del device_map[key]
        device_map.pop(module_name, None)
        device_map[module_name] = device
        return device_map
    depth = len(module_name.split(".")) + 1 if module_name else 1
    children = dict.fromkeys(".".join(k.split(".")[:depth]) for k in under)
    for child in children:
        clean_device_map(device_map, child)
    return device_map


def device_for(name: str, device_map: Mapping[str, V]) -> V:
    """The device ``device_map`` gives to the tensor or module ``name`` (longest matching entry)."""
    while True:
        if name in device_map:
            return device_map[name]
        if not name:
            raise KeyError(name)
        name = name.rpartition(".")[0]


def check_device_map(model: torch.nn.Module, device_map: Mapping[str, object]) -> None:
    """Raise ValueError unless every parameter and buffer of ``model`` is covered by ``device_map``;
    warn about entries that name no module or tensor of the model (they are ignored)."""
    names = {n for n, _ in model.named_parameters(remove_duplicate=False)}
    names |= {n for n, _ in model.named_buffers(remove_duplicate=False)}
    modules = {n for n, _ in model.named_modules(remove_duplicate=False)}
    unknown = [k for k in device_map if k not in names and k not in modules]
    if unknown:  # as in Accelerate: a warning, the entries are ignored
        warnings.warn(
            f"device_map keys do not match any submodules or weights of the model: "
            f"{', '.join(map(repr, unknown[:5]))}; those entries are ignored",
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


def main_device(device_map: Mapping[str, object]) -> Device:
    """The fastest device used by ``device_map`` (where offloaded layers run): an accelerator, else the CPU."""
    devices = {normalize_device(d) for d in device_map.values()}
    devices.discard("disk")
    if not devices:
        return "cpu"
    return min(devices, key=_device_rank)


def check_tied_parameters_on_same_device(
    tied_params: list[list[str]], device_map: Mapping[str, object]
) -> None:
    """Warn for every group of tied parameters that ``device_map`` puts on several devices."""
    for group in tied_params:
        placed = {name: device_for(name, device_map) for name in group}
        if len(set(map(str, placed.values()))) > 1:
            warnings.warn(
                f"tied parameters are on different devices: {placed}; put them on one device",
                stacklevel=2,
            )
