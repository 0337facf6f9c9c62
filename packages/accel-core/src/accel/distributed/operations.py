"""Collective operations over nested structures of tensors.

Every function accepts tensors nested in lists, tuples, dicts and dataclass-like
mappings and returns the same structure. In debug mode (``ACCEL_DEBUG_MODE=1``)
collectives first compare shapes across ranks and raise
:class:`DistributedOperationException` instead of hanging.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, TypeVar, cast, overload

import torch
import torch.distributed as dist

if TYPE_CHECKING:
    from torch.distributed import ProcessGroup

from accel.faults import flight


class DistributedOperationException(Exception):
    """A collective was called with inputs that do not match across processes."""


#: A nested structure of tensors that an operation returns in the same shape (tensors stay tensors).
T = TypeVar("T")
_F = TypeVar("_F", bound=Callable[..., object])


def is_torch_tensor(tensor: object) -> bool:
    """Whether ``tensor`` is a ``torch.Tensor``."""
    return isinstance(tensor, torch.Tensor)


is_tensor_like = is_torch_tensor


def _rebuild_sequence(like: tuple[object, ...] | list[object], items: list[object]) -> object:
    """A list / tuple / namedtuple of ``like``'s type holding ``items``."""
    make = cast("Callable[..., object]", type(like))
    return make(*items) if hasattr(like, "_fields") else make(items)


def _rebuild_mapping(like: Mapping[object, object], items: dict[object, object]) -> object:
    """A mapping of ``like``'s type holding ``items`` (a plain dict when that type cannot be built from one)."""
    make = cast("Callable[..., object]", type(like))
    try:
        return make(items)
    except TypeError:
        return items


def recursively_apply(
    func: Callable[..., object],
    data: object,
    *args: object,
    test_type: Callable[[object], bool] = is_tensor_like,
    error_on_other_type: bool = False,
    **kwargs: object,
) -> object:
    """Apply ``func`` to every leaf of ``data`` passing ``test_type``, keeping the structure."""
    if isinstance(data, (tuple, list)):
        mapped = [
            recursively_apply(
                func,
                o,
                *args,
                test_type=test_type,
                error_on_other_type=error_on_other_type,
                **kwargs,
            )
            for o in data
        ]
        return _rebuild_sequence(data, mapped)
    if isinstance(data, Mapping):
        mapped = {
            k: recursively_apply(
                func,
                v,
                *args,
                test_type=test_type,
                error_on_other_type=error_on_other_type,
                **kwargs,
            )
            for k, v in data.items()
        }
        return _rebuild_mapping(data, mapped)
    if test_type(data):
        return func(data, *args, **kwargs)
    if error_on_other_type:
        func_name = getattr(func, "__name__", repr(func))
        test_name = getattr(test_type, "__name__", repr(test_type))
        raise TypeError(
            f"Unsupported types ({type(data)}) passed to `{func_name}`. Only nested list/tuple/dicts "
            f"of objects that are valid for `{test_name}` should be passed."
        )
    return data


def send_to_device(
    data: T,
    device: torch.device | str | int,
    non_blocking: bool = False,
    skip_keys: list[str] | str | None = None,
) -> T:
    """Move every tensor (or object with ``.to``) in ``data`` to ``device``."""
    if isinstance(skip_keys, str):
        skip_keys = [skip_keys]
    return cast(T, _send(data, device, non_blocking, skip_keys))


def _send(
    data: object, device: torch.device | str | int, non_blocking: bool, skip_keys: list[str] | None
) -> object:
    if isinstance(data, (tuple, list)):
        return _rebuild_sequence(data, [_send(o, device, non_blocking, skip_keys) for o in data])
    if isinstance(data, Mapping):
        moved = {
            k: v if skip_keys and k in skip_keys else _send(v, device, non_blocking, skip_keys)
            for k, v in data.items()
        }
        return _rebuild_mapping(data, moved)
    if isinstance(data, torch.Tensor):
        if (
            data.device == torch.device(device)
            if isinstance(device, str)
            else data.device == device
        ):
            return data
        return data.to(device, non_blocking=non_blocking and data.device.type == "cpu")
    to = getattr(data, "to", None)
    if to is not None and not isinstance(data, torch.nn.Module):
        try:
            return to(device, non_blocking=non_blocking)
        except TypeError:
            return to(device)
    return data


def _world() -> int:
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def _debug_enabled() -> bool:
    from accel.state import PartialState

    return bool(PartialState._shared_state.get("debug"))


def get_shapes(data: object) -> object:
    """The structure of ``data`` with each tensor replaced by its shape as a list."""
    return recursively_apply(lambda t: list(t.shape), data)


def _verify(name: str, data: object) -> None:
    """Debug mode: gather every rank's shapes and raise unless they are all the same."""
    everyone: list[object] = [None] * _world()
    dist.all_gather_object(everyone, get_shapes(data))
    if any(shapes != everyone[0] for shapes in everyone):
        lines = "\n".join(f"  - Process {i}: {s}" for i, s in enumerate(everyone))
        raise DistributedOperationException(
            f"Cannot apply desired operation due to shape mismatches. All shapes across devices must be valid.\n"
            f"Operation: `accel.utils.operations.{name}`\nInput shapes:\n{lines}"
        )


def _verify_dimensions(name: str, data: object) -> None:
    """Debug mode: raise unless every rank passes the same structure of tensors with the same ndims.

    The sizes may differ (what padding evens out); the numbers of dimensions may not.
    """
    everyone: list[tuple[object, object]] = [(None, None)] * _world()
    dist.all_gather_object(everyone, (get_shapes(data), recursively_apply(lambda t: t.ndim, data)))
    if any(ndims != everyone[0][1] for _, ndims in everyone):
        lines = "\n".join(f"  - Process {i}: {s}" for i, (s, _) in enumerate(everyone))
        raise DistributedOperationException(
            f"Cannot apply desired operation: the tensors have different numbers of dimensions across processes.\n"
            f"Operation: `accel.utils.operations.{name}`\nInput shapes:\n{lines}"
        )


def verify_operation(function: _F) -> _F:
    """Decorator: in debug mode, check that shapes match across ranks before running the collective."""

    name = getattr(function, "__name__", "collective")

    @functools.wraps(function)
    def wrapper(data: object, *args: object, **kwargs: object) -> object:
        if _world() > 1:
            flight.record(name)  # ACCEL_FLIGHT_DIR only: one line per collective
        if _world() > 1 and _debug_enabled():
            _verify(name, data)
        return function(data, *args, **kwargs)

    return cast("_F", wrapper)


def _gather_one(tensor: torch.Tensor, group: ProcessGroup | None = None) -> torch.Tensor:
    if tensor.ndim == 0:
        tensor = tensor.clone()[None]
    tensor = tensor.detach().contiguous()  # the gathered copy carries no autograd history
    world = dist.get_world_size(group)
    if dist.get_backend(group) == "gloo":  # gloo has no all_gather_into_tensor
        parts = [torch.empty_like(tensor) for _ in range(world)]
        dist.all_gather(parts, tensor, group=group)
        return torch.cat(parts, dim=0)
    out = torch.empty(
        (world * tensor.shape[0], *tensor.shape[1:]), dtype=tensor.dtype, device=tensor.device
    )
    dist.all_gather_into_tensor(out, tensor, group=group)
    return out


@verify_operation
def gather(tensor: T) -> T:
    """Concatenate ``tensor`` (nested) from every process along the first dimension."""
    if _world() == 1:
        return tensor
    return cast(T, recursively_apply(_gather_one, tensor, error_on_other_type=True))


def is_tensor_structure(data: object) -> bool:
    """Whether ``data`` is a tensor or lists/tuples/dicts holding only tensors."""
    if isinstance(data, torch.Tensor):
        return True
    if isinstance(data, (list, tuple)):
        return len(data) > 0 and all(is_tensor_structure(d) for d in data)
    if isinstance(data, Mapping):
        return len(data) > 0 and all(is_tensor_structure(d) for d in data.values())
    return False


def _gather_uneven_one(tensor: torch.Tensor) -> torch.Tensor:
    if tensor.ndim == 0:
        tensor = tensor[None]
    sizes = _gather_one(torch.tensor([tensor.shape[0]], device=tensor.device)).tolist()
    longest = max(sizes)
    if longest == 0:
        return tensor
    if tensor.shape[0] < longest:
        padding = tensor.new_zeros((longest - tensor.shape[0], *tensor.shape[1:]))
        tensor = torch.cat([tensor, padding])
    chunks = _gather_one(tensor).split(longest)
    return torch.cat([chunk[:size] for chunk, size in zip(chunks, sizes)])


def gather_uneven(tensor: T) -> T:
    """Like :func:`gather`, for tensors whose first dimension differs across processes."""
    if _world() == 1:
        return tensor
    flight.record("gather_uneven")
    return cast(T, recursively_apply(_gather_uneven_one, tensor, error_on_other_type=True))


@overload
def gather_object(obj: list[T]) -> list[T]: ...


@overload
def gather_object(obj: T) -> list[T]: ...


def gather_object(obj: object) -> list[object]:
    """Gather a picklable object from every process; lists are concatenated."""
    if _world() == 1:
        return obj if isinstance(obj, list) else [obj]
    everyone: list[object] = [None] * _world()
    flight.record("gather_object")
    dist.all_gather_object(everyone, obj)
    if all(isinstance(o, list) for o in everyone):
        return [x for o in cast("list[list[object]]", everyone) for x in o]
    return everyone


@verify_operation
def reduce(tensor: T, reduction: str = "mean", scale: float = 1.0) -> T:
    """All-reduce ``tensor`` (nested) across processes, times ``scale``.

    ``reduction`` is ``"mean"``, ``"sum"``, ``"max"`` or ``"none"``. As in Accelerate,
    ``"none"`` sums across processes without dividing (on one process every
    reduction returns a copy). ``"mean"`` of an integer tensor floor-divides.
    """
    if reduction not in ("sum", "mean", "max", "none"):
        raise ValueError(f"reduce(reduction={reduction!r}): use 'mean', 'sum', 'max' or 'none'")

    def _reduce(t: torch.Tensor) -> torch.Tensor:
        out = t.clone()
        if _world() > 1:
            op = dist.ReduceOp.MAX if reduction == "max" else dist.ReduceOp.SUM
            dist.all_reduce(out, op=op)
        if reduction == "mean":
            out = out / _world() if out.is_floating_point() else out // _world()
        return out * scale if scale != 1.0 else out

    return cast(T, recursively_apply(_reduce, tensor, error_on_other_type=True))


@verify_operation
def broadcast(tensor: T, from_process: int = 0) -> T:
    """Broadcast ``tensor`` (nested, in place) from ``from_process`` to every process."""
    if _world() == 1:
        return tensor

    def _bcast(t: torch.Tensor) -> torch.Tensor:
        dist.broadcast(t, src=from_process)
        return t

    return cast(T, recursively_apply(_bcast, tensor, error_on_other_type=True))


def broadcast_object_list(object_list: list[T], from_process: int = 0) -> list[T]:
    """Broadcast picklable objects in ``object_list`` (in place) from ``from_process``."""
    if _world() > 1:
        flight.record("broadcast_object_list")
        dist.broadcast_object_list(object_list, src=from_process)
    return object_list


def pad_across_processes(tensor: T, dim: int = 0, pad_index: int = 0, pad_first: bool = False) -> T:
    """Pad each tensor along ``dim`` to the largest size across processes, so it can be gathered.

    In debug mode, ranks whose tensors differ in structure or number of dimensions raise
    :class:`DistributedOperationException` instead of padding different dimensions.
    """
    if _world() > 1:
        flight.record("pad_across_processes")
        if _debug_enabled():
            _verify_dimensions("pad_across_processes", tensor)

    def _pad(t: torch.Tensor) -> torch.Tensor:
        if getattr(t, "is_nested", False):  # its sizes are per component: nothing to pad to
            import warnings

            warnings.warn(
                "pad_across_processes cannot pad a nested tensor: it is returned as it is",
                CannotPadNestedTensorWarning,
                stacklevel=3,
            )
            return t
        if _world() == 1 or dim >= t.ndim or t.ndim == 0:
            return t
        size = torch.tensor([t.shape[dim]], device=t.device)
        sizes = _gather_one(size)
        longest = int(sizes.max())
        if longest == t.shape[dim]:
            return t
        new_shape = list(t.shape)
        new_shape[dim] = longest
        out = t.new_full(new_shape, pad_index)
        index = [slice(None)] * t.ndim
        index[dim] = slice(longest - t.shape[dim], longest) if pad_first else slice(0, t.shape[dim])
        out[tuple(index)] = t
        return out

    return cast(T, recursively_apply(_pad, tensor, error_on_other_type=True))


def concatenate(data: list[T], dim: int = 0) -> T:
    """Concatenate a list of nested structures of tensors leaf by leaf.

    A list holding a single non-tensor leaf returns that leaf as is (as in Accelerate);
    several non-tensor leaves raise ``TypeError``.
    """
    first = data[0]
    if isinstance(first, (tuple, list)):
        rows = cast("list[Sequence[object]]", data)
        joined = (concatenate([row[i] for row in rows], dim=dim) for i in range(len(first)))
        return cast(T, cast("Callable[..., object]", type(first))(joined))
    if isinstance(first, Mapping):
        maps = cast("list[Mapping[object, object]]", data)
        joined = {k: concatenate([m[k] for m in maps], dim=dim) for k in first}
        return cast(T, cast("Callable[..., object]", type(first))(joined))
    if isinstance(first, torch.Tensor):
        return cast(T, torch.cat(cast("list[torch.Tensor]", data), dim=dim))
    if isinstance(data, (tuple, list)) and len(data) == 1:
        return first
    raise TypeError(f"concatenate: unsupported type {type(first).__name__}")


def find_batch_size(data: object) -> int | None:
    """The first dimension of the first tensor found in ``data``."""
    if isinstance(data, (tuple, list)):
        for item in data:
            size = find_batch_size(item)
            if size is not None:
                return size
        return None
    if isinstance(data, Mapping):
        return find_batch_size(list(data.values()))
    if isinstance(data, torch.Tensor):
        return data.shape[0] if data.ndim else None
    return None


def slice_tensors(data: T, tensor_slice: slice) -> T:
    """Slice every tensor in ``data`` along the first dimension."""
    return cast(T, recursively_apply(lambda t: t[tensor_slice], data))


def convert_to_fp32(data: T) -> T:
    """Cast every fp16/bf16 tensor in ``data`` to fp32."""
    converted = recursively_apply(
        lambda t: t.float(),
        data,
        test_type=lambda t: (
            isinstance(t, torch.Tensor) and t.dtype in (torch.float16, torch.bfloat16)
        ),
    )
    return cast(T, converted)


# -- more of Accelerate's structure helpers ---------------------------------------------------


class CannotPadNestedTensorWarning(UserWarning):
    """:func:`pad_input_tensors` met a nested tensor, which it cannot pad (it is returned unchanged)."""


def is_namedtuple(data: object) -> bool:
    """Whether ``data`` is a ``collections.namedtuple`` instance."""
    return isinstance(data, tuple) and hasattr(data, "_asdict") and hasattr(data, "_fields")


def honor_type(obj: T, generator: Iterable[object]) -> T:
    """A sequence of ``obj``'s type (namedtuples included) built from ``generator``."""
    make = cast("Callable[..., T]", type(obj))
    if is_namedtuple(obj):
        return make(*list(generator))
    return make(generator)


class TensorInformation:
    """The shape and dtype of a tensor, without its data (see :func:`get_data_structure`)."""

    def __init__(self, shape: torch.Size, dtype: torch.dtype):
        self.shape = shape
        self.dtype = dtype

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, TensorInformation)
            and self.shape == other.shape
            and self.dtype == other.dtype
        )

    def __repr__(self) -> str:
        return f"TensorInformation(shape={self.shape}, dtype={self.dtype})"


def is_tensor_information(tensor_info: object) -> bool:
    """Whether ``tensor_info`` is a :class:`TensorInformation`."""
    return isinstance(tensor_info, TensorInformation)


def get_data_structure(data: object) -> object:
    """``data`` with every tensor replaced by its :class:`TensorInformation`."""
    return recursively_apply(lambda t: TensorInformation(shape=t.shape, dtype=t.dtype), data)


def initialize_tensors(data_structure: object) -> object:
    """Empty tensors shaped as the :class:`TensorInformation` leaves of ``data_structure``."""
    return recursively_apply(
        lambda info: torch.empty(info.shape, dtype=info.dtype),
        data_structure,
        test_type=is_tensor_information,
    )


def listify(data: object) -> object:
    """``data`` with every tensor turned into (nested) Python lists / numbers."""
    return recursively_apply(lambda t: t.tolist(), data)


def ignorant_find_batch_size(data: object) -> int | None:
    """:func:`find_batch_size`, or None when ``data`` holds no tensor."""
    try:
        return find_batch_size(data)
    except (ValueError, TypeError):
        return None


def copy_tensor_to_devices(tensor: torch.Tensor | None = None) -> torch.Tensor:
    """The main process's ``tensor`` on every process (others pass a tensor of the same shape, or None on one process)."""
    from accel.state import PartialState

    state = PartialState()
    if tensor is None:
        raise ValueError("copy_tensor_to_devices needs a tensor of the shape to receive")
    tensor = tensor.to(state.device)
    if _world() > 1:
        if not state.is_main_process:
            tensor = torch.zeros_like(tensor)
        dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
    return tensor


def gather_across_data_parallel_groups(tensor: T) -> T:
    """Gather ``tensor`` (nested) over the data-parallel processes only.

    Under N-D parallelism with tensor / context parallelism (an
    :class:`~accel.ParallelismConfig` whose mesh has ``tp`` or ``cp``), the ranks of one
    TP / CP group hold the same samples: the gather runs over the mesh's ``dp`` group (one
    copy per data-parallel rank, in data-parallel-rank order; unchanged with one such rank).
    Otherwise over all processes, as :func:`gather`.
    """
    from accel.state import PartialState

    config = PartialState._shared_state.get("parallelism_config")
    mesh = PartialState._shared_state.get("device_mesh")
    if config is None or mesh is None or not config.non_dp_dim_names:
        return gather(tensor)
    if not config.dp_dim_names:
        return tensor
    group = mesh["dp"].get_group()
    gathered = recursively_apply(lambda t: _gather_one(t, group), tensor, error_on_other_type=True)
    return cast(T, gathered)


def pad_input_tensors(tensor: T, batch_size: int, num_processes: int, dim: int = 0) -> T:
    """Pad each tensor along ``dim`` (repeating its last slice) so ``batch_size`` divides by ``num_processes``."""

    def _pad(t: torch.Tensor) -> torch.Tensor:
        if getattr(t, "is_nested", False):
            import warnings

            warnings.warn(
                "pad_input_tensors cannot pad a nested tensor: it is returned as it is",
                CannotPadNestedTensorWarning,
                stacklevel=3,
            )
            return t
        if dim >= t.ndim or batch_size % num_processes == 0:
            return t
        remainder = num_processes - batch_size % num_processes
        last = t.narrow(dim, t.shape[dim] - 1, 1)
        return torch.cat([t, *[last] * remainder], dim=dim)

    return cast(T, recursively_apply(_pad, tensor, error_on_other_type=True))


class _ConvertOutputsToFp32:
    """A forward whose outputs are cast to fp32 (picklable)."""

    def __init__(self, model_forward: Callable[..., object]):
        self.model_forward = model_forward
        functools.update_wrapper(self, model_forward)

    def __call__(self, *args: object, **kwargs: object) -> object:
        return convert_to_fp32(self.model_forward(*args, **kwargs))


def convert_outputs_to_fp32(model_forward: Callable[..., object]) -> Callable[..., object]:
    """Wrap ``model_forward`` so that its fp16/bf16 outputs come back as fp32."""
    return _ConvertOutputsToFp32(model_forward)


def get_pretty_name(obj: object) -> str:
    """The qualified name of a function or class (of ``obj``'s class otherwise)."""
    if not hasattr(obj, "__qualname__") and not hasattr(obj, "__name__"):
        obj = getattr(obj, "__class__", obj)
    return getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or str(obj)


def merge_dicts(source: dict, destination: dict) -> dict:
    """Merge ``source`` into ``destination`` recursively (nested dicts merged, other values replaced)."""
    for key, value in source.items():
        if isinstance(value, dict):
            merge_dicts(value, destination.setdefault(key, {}))
        else:
            destination[key] = value
    return destination


def recursive_getattr(obj: object, attr: str) -> object:
    """``obj.a.b.c`` for ``attr="a.b.c"``."""
    return functools.reduce(getattr, attr.split("."), obj)
