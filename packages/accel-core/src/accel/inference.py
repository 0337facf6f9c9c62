"""Pipeline-parallel inference over several processes, on ``torch.distributed.pipelining``.

    model = prepare_pippy(model, example_args=(inputs,))     # every process, same model
    with torch.no_grad():
        output = model(inputs)
    if PartialState().is_last_process:
        print(output)

The model is traced, cut into one stage per process at ``split_points`` and each process
keeps its stage. A batch is cut into ``num_chunks`` micro-batches that flow through the
stages (GPipe schedule), so all processes work at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

import torch

from accel.big_model.device_map import get_balanced_memory, infer_auto_device_map
from accel.distributed.operations import send_to_device
from accel.logging import get_plain_logger
from accel.state import PartialState

if TYPE_CHECKING:
    from torch.distributed.pipelining import ScheduleGPipe

    from accel.big_model.device_map import Device

logger = get_plain_logger(__name__)

T = TypeVar("T")


def generate_device_map(
    model: torch.nn.Module,
    num_processes: int = 1,
    no_split_module_classes: Iterable[str] | None = None,
    max_memory: Mapping[Any, int | str] | None = None,  # keys: devices (Mapping keys are invariant)
) -> dict[str, Device]:
    """A device map spreading ``model`` evenly over ``num_processes`` stages (indices 0..n-1).

    Only sizes are used: no device is touched, so this works on CPU-only machines too.
    """
    if max_memory is None:
        total = sum(p.numel() * p.element_size() for p in model.parameters())
        total += sum(b.numel() * b.element_size() for b in model.buffers())
        max_memory = dict.fromkeys(range(num_processes), total + 1)
        max_memory["cpu"] = 0
    no_split = list(no_split_module_classes or getattr(model, "_no_split_modules", None) or [])
    budgets = get_balanced_memory(model, max_memory=max_memory, no_split_module_classes=no_split)
    return infer_auto_device_map(
        model, max_memory=budgets, no_split_module_classes=no_split, clean_result=False
    )


def find_pippy_batch_size(
    args: Iterable[object] | None, kwargs: Mapping[str, object] | None
) -> int | None:
    """The size of the first dimension of the first tensor in ``args`` / ``kwargs``."""
    for item in [*(args or ()), *((kwargs or {}).values())]:
        if isinstance(item, torch.Tensor):
            return item.shape[0] if item.dim() > 0 else None
    return None


def _split_points_from_map(model: torch.nn.Module, device_map: Mapping[str, object]) -> list[str]:
    """The first module placed on each new device, in registration order.

    Entries sent back to an earlier device (a head tied to the embedding) do not start a stage.
    """
    modules = {name for name, _ in model.named_modules()}
    points: list[str] = []
    seen: set[object] = set()
    for name, device in device_map.items():
        if device in seen:
            continue
        if seen:
            if name not in modules:
                raise ValueError(
                    f"the automatic split falls on the tensor {name!r}, which cannot start a "
                    "stage: pass split_points=[module names] explicitly"
                )
            points.append(name)
        seen.add(device)
    return points


def _first_chunk(data: T, num_chunks: int) -> T:
    return cast(T, _first_chunk_of(data, num_chunks))


def _first_chunk_of(data: object, num_chunks: int) -> object:
    if isinstance(data, torch.Tensor):
        return torch.tensor_split(data, num_chunks)[0] if data.dim() > 0 else data
    if isinstance(data, (list, tuple)):
        return type(data)(_first_chunk_of(d, num_chunks) for d in data)
    if isinstance(data, Mapping):
        return {k: _first_chunk_of(v, num_chunks) for k, v in data.items()}
    return data


def build_pipeline(
    model: torch.nn.Module,
    split_points: list[str],
    example_args: tuple[object, ...],
    example_kwargs: Mapping[str, object] | None,
    num_chunks: int,
) -> ScheduleGPipe:
    """Trace ``model``, cut it before each of ``split_points`` and return this process's schedule."""
    from torch.distributed.pipelining import ScheduleGPipe, SplitPoint, pipeline

    state = PartialState()
    mb_args = _first_chunk(tuple(example_args), num_chunks)
    mb_kwargs = _first_chunk(dict(example_kwargs or {}), num_chunks) or None
    pipe = pipeline(
        model,
        mb_args=mb_args,
        mb_kwargs=mb_kwargs,
        split_spec=dict.fromkeys(split_points, SplitPoint.BEGINNING),
    )
    stage = pipe.build_stage(state.process_index, device=state.device)
    return ScheduleGPipe(stage, num_chunks)


def pippy_forward(
    forward: Callable[..., object],
    num_chunks: int,
    gather_output: bool,
    *args: object,
    **kwargs: object,
) -> object:
    """Run one batch through the pipeline; the output lands on the last process."""
    import torch.distributed as dist

    state = PartialState()
    if state.is_main_process:
        args = send_to_device(args, state.device)
        kwargs = send_to_device(kwargs, state.device)
        batch = find_pippy_batch_size(args, kwargs)
        if batch is not None and batch % num_chunks:
            raise ValueError(
                f"batch size {batch} is not divisible by num_chunks={num_chunks}: pad the batch "
                "or choose another num_chunks"
            )
        output = forward(*args, **kwargs)
    else:
        output = forward()
    if gather_output:
        holder = [output if state.is_last_process else None]
        dist.broadcast_object_list(holder, src=state.num_processes - 1)
        output = send_to_device(holder[0], state.device)
    return output


def prepare_pippy(
    model: torch.nn.Module,
    split_points: str | list[str] | None = "auto",
    no_split_module_classes: list[str] | None = None,
    example_args: tuple[object, ...] | None = (),
    example_kwargs: Mapping[str, object] | None = None,
    num_chunks: int | None = None,
    gather_output: bool = False,
) -> torch.nn.Module:
    """Wrap ``model`` for pipeline-parallel inference over all processes; return it.

    Args:
        model: the same model (same weights) on every process.
        split_points: ``"auto"`` (even split from a balanced device map over the processes) or
            the names of the modules that start stages 2, 3, ... (one per process after the first).
        no_split_module_classes: classes the automatic split never cuts through.
        example_args / example_kwargs: a batch of inputs like the real ones (used to trace).
        num_chunks: micro-batches per batch (default: the number of processes); the batch size
            must be divisible by it.
        gather_output: also send the output to every process (else only the last has it).

    Calling the returned model runs the pipeline: pass the inputs on the first process (the
    others may pass them too; they are ignored). The output is returned on the last process
    (on all of them with ``gather_output``), ``None`` elsewhere.
    """
    state = PartialState()
    if state.num_processes < 2:
        raise ValueError(
            "prepare_pippy needs several processes (one per pipeline stage): launch the script "
            "with `accel launch --num_processes N` or torchrun"
        )
    num_chunks = num_chunks or state.num_processes
    if split_points == "auto" or split_points is None:
        device_map = generate_device_map(model, state.num_processes, no_split_module_classes)
        split_points = _split_points_from_map(model, device_map)
    else:
        split_points = list(split_points)
    if len(split_points) != state.num_processes - 1:
        raise ValueError(
            f"{len(split_points) + 1} pipeline stages for {state.num_processes} processes "
            f"(split points {split_points}): give exactly {state.num_processes - 1} split points"
        )
    model.eval()
    schedule = build_pipeline(model, split_points, example_args or (), example_kwargs, num_chunks)
    step = getattr(schedule, "eval", None) or schedule.step

    def forward(*args: object, **kwargs: object) -> object:
        with torch.no_grad():
            return pippy_forward(step, num_chunks, gather_output, *args, **kwargs)

    model.forward = forward  # type: ignore[method-assign]
    # plain attributes (Module.__setattr__ is typed for tensors and modules only)
    vars(model).update(
        pippy_split_points=split_points, pippy_schedule=schedule, pippy_num_chunks=num_chunks
    )
    return model


__all__ = ["generate_device_map", "prepare_pippy"]
