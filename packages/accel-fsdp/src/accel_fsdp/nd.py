"""N-D parallelism for the FSDP backend: tensor parallelism, then FSDP2 over the data-parallel mesh.

The layout is the :class:`accel.ParallelismConfig` of the run and the named mesh the
process state built from it (``accelerator.torch_device_mesh``). In TorchTitan's order,
:meth:`NDLayout.parallelize` splits weights over ``tp`` with DTensor's
``parallelize_module`` (column-/row-wise styles from the model's ``tp_plan`` or the user's
``tp_handler.tp_plan``), and the backend then calls ``fully_shard`` over
:attr:`NDLayout.fsdp_mesh`: ``dp_shard_cp``, or ``dp_replicate`` x ``dp_shard_cp`` (HSDP).

:class:`NDParallelMixin` gives the backend what depends on the layout beyond wrapping:
loaders shard over the data-parallel ranks only (the ranks of one TP / CP group read the
same batch), the collectives (``gather``, ``gather_object``, ``gather_uneven``, ``reduce``:
what ``gather_for_metrics`` and ``reduce`` use) go over the data-parallel group when TP / CP
ranks hold copies, and ``context_parallel`` splits buffers along their sequence dimension.
"""

from __future__ import annotations

import contextlib
import fnmatch
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Protocol, TypeVar, cast

import torch
import torch.distributed as dist
from accel.errors import ConfigError

if TYPE_CHECKING:
    from accel import ParallelismConfig
    from torch.distributed import ProcessGroup
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.tensor.parallel import ParallelStyle

TreeT = TypeVar("TreeT")
"""Tensors in nested lists, tuples and dicts, as the collectives take and give them."""


TP_STYLES = ("colwise", "rowwise", "colwise_rep", "rowwise_rep", "sequence_parallel")
"""Names a ``tp_plan`` may use for a module's style."""


def tp_style(style: str | ParallelStyle) -> ParallelStyle:
    """The DTensor ``ParallelStyle`` for a plan entry (a name of :data:`TP_STYLES` or a style object)."""
    from torch.distributed.tensor import Replicate
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        ParallelStyle,
        RowwiseParallel,
        SequenceParallel,
    )

    if isinstance(style, ParallelStyle):
        return style
    makers = {
        "colwise": ColwiseParallel,
        "rowwise": RowwiseParallel,
        "colwise_rep": lambda: ColwiseParallel(output_layouts=Replicate()),
        "rowwise_rep": lambda: RowwiseParallel(input_layouts=Replicate()),
        "sequence_parallel": SequenceParallel,
    }
    maker = makers.get(str(style).lower())
    if maker is None:
        raise ConfigError(
            f"tensor-parallel style {style!r} is not known: use one of {', '.join(TP_STYLES)} "
            "or a torch.distributed.tensor.parallel style object"
        )
    return maker()


def resolve_tp_plan(
    model: torch.nn.Module, plan: Mapping[str, str | ParallelStyle]
) -> dict[str, ParallelStyle]:
    """``{module name: ParallelStyle}`` for ``plan``'s patterns (``*`` matches one name part).

    A pattern that matches no module of ``model`` is a ConfigError naming it.
    """
    names = [name for name, _ in model.named_modules() if name]
    resolved: dict[str, ParallelStyle] = {}
    for pattern, style in plan.items():
        parts = pattern.split(".")
        matched = [
            name
            for name in names
            if len(name.split(".")) == len(parts)
            and all(fnmatch.fnmatchcase(n, p) for n, p in zip(name.split("."), parts))
        ]
        if not matched:
            raise ConfigError(
                f"tp_plan entry {pattern!r} matches no module of {type(model).__name__}"
            )
        for name in matched:
            resolved[name] = tp_style(style)
    return resolved


def model_tp_plan(model: torch.nn.Module) -> dict[str, str | ParallelStyle] | None:
    """The model's own plan: ``model.tp_plan`` or ``model._tp_plan`` (transformers), else None."""
    for attr in ("tp_plan", "_tp_plan"):
        plan = getattr(model, attr, None)
        if isinstance(plan, dict) and plan:
            return plan
    return None


def _is_tensor_parallel(model: torch.nn.Module) -> bool:
    """Whether a parameter is already a DTensor over a ``tp`` mesh (e.g. loaded split by transformers)."""
    from torch.distributed.tensor import DTensor

    for param in model.parameters():
        if isinstance(param, DTensor) and "tp" in (param.device_mesh.mesh_dim_names or ()):
            return True
    return False


class MeshOwner(Protocol):
    """What holds a run's layout: an Accelerator or a backend context."""

    @property
    def parallelism_config(self) -> ParallelismConfig | None: ...

    @property
    def torch_device_mesh(self) -> DeviceMesh | None: ...


class NDLayout:
    """The run's :class:`~accel.ParallelismConfig` and its mesh, as the FSDP backend applies them."""

    def __init__(self, config: ParallelismConfig, mesh: DeviceMesh):
        self.config = config
        """The :class:`accel.ParallelismConfig`."""
        self.mesh = mesh
        """The named root mesh (``accelerator.torch_device_mesh``)."""
        self._replicate_mesh: DeviceMesh | None = None

    @classmethod
    def of(cls, owner: MeshOwner) -> NDLayout | None:
        """The layout of ``owner`` (an Accelerator or a backend context: their
        ``parallelism_config`` and ``torch_device_mesh``), or None without a config or mesh."""
        config = owner.parallelism_config
        mesh = owner.torch_device_mesh
        if config is None or mesh is None:
            return None
        return cls(config, mesh)

    # -- ranks ------------------------------------------------------------------
    @property
    def dp_size(self) -> int:
        """Number of data-parallel ranks (different batches per step)."""
        return self.config.data_parallel_size

    @property
    def dp_rank(self) -> int:
        """This process's data-parallel rank (shared by its TP / CP peers)."""
        return self.mesh["dp"].get_local_rank() if self.config.dp_dim_names else 0

    @property
    def has_copies(self) -> bool:
        """Whether several ranks hold the same batch (TP, CP or SP is on)."""
        return bool(self.config.non_dp_dim_names)

    def dp_group(self) -> ProcessGroup | None:
        """The data-parallel process group, or None when there is one data-parallel rank."""
        return self.mesh["dp"].get_group() if self.config.dp_dim_names else None

    # -- wrapping -------------------------------------------------------------------
    @property
    def fsdp_mesh(self) -> DeviceMesh | None:
        """The mesh ``fully_shard`` uses: ``dp_shard_cp`` or (HSDP) ``dp_replicate`` x ``dp_shard_cp``.

        None when nothing is sharded or replicated (tensor parallelism only).
        """
        config = self.config
        if config.dp_shard_cp_dim_names:
            return self.mesh[tuple(config.fsdp_dim_names)]
        if config.dp_replicate_enabled:  # replicas only: HSDP with shards of one process
            if self._replicate_mesh is None:
                from torch.distributed.device_mesh import init_device_mesh

                self._replicate_mesh = init_device_mesh(
                    self.mesh.device_type,
                    (config.dp_replicate_size or 1, 1),
                    mesh_dim_names=("dp_replicate", "dp_shard_cp"),
                )
            return self._replicate_mesh
        return None

    def tp_plan(self, model: torch.nn.Module) -> Mapping[str, str | ParallelStyle]:
        """The plan to apply: ``tp_handler.tp_plan``, else the model's own; ConfigError when neither."""
        handler = self.config.tp_handler
        plan = getattr(handler, "tp_plan", None) or model_tp_plan(model)
        if not plan:
            raise ConfigError(
                f"tp_size={self.config.tp_size} needs a tensor-parallel plan: "
                f"{type(model).__name__} has no tp_plan; pass ParallelismConfig(tp_handler="
                "TorchTensorParallelConfig(tp_plan={'layers.*.up': 'colwise', ...}))"
            )
        return plan

    def parallelize(self, model: torch.nn.Module) -> torch.nn.Module:
        """Split ``model``'s weights over ``tp`` (unless it is already split); returns it."""
        if not self.config.tp_enabled or _is_tensor_parallel(model):
            return model
        from torch.distributed.tensor.parallel import parallelize_module

        plan = resolve_tp_plan(model, self.tp_plan(model))
        return parallelize_module(model, self.mesh["tp"], plan)

    # -- context parallelism ----------------------------------------------------------
    def context_parallel(
        self,
        buffers: list[torch.Tensor] | None,
        buffer_seq_dims: list[int] | None,
        no_restore_buffers: set[torch.Tensor] | None,
    ) -> contextlib.AbstractContextManager:
        """torch's ``context_parallel`` over ``cp``: each buffer keeps its rank's share of the sequence.

        Inside, SDPA runs as ring attention (a GPU kernel); on exit the buffers not in
        ``no_restore_buffers`` get their full contents back.
        """
        if not self.config.cp_enabled:
            return contextlib.nullcontext()
        buffers = list(buffers or [])
        seq_dims = list(buffer_seq_dims or [])
        if len(seq_dims) != len(buffers):
            raise ValueError(
                f"buffer_seq_dims has {len(seq_dims)} entries for {len(buffers)} buffers"
            )
        for buffer, dim in zip(buffers, seq_dims):
            if buffer.shape[dim] % (2 * (self.config.cp_size or 1)):
                raise ValueError(
                    f"a buffer's sequence length {buffer.shape[dim]} (dim {dim}) must be divisible "
                    f"by 2 x cp_size = {2 * (self.config.cp_size or 1)} (load-balanced context parallelism)"
                )
        from torch.distributed.tensor.experimental import context_parallel
        from torch.distributed.tensor.experimental._attention import set_rotate_method

        handler = self.config.cp_handler
        strategy = handler.cp_comm_strategy if handler is not None else None
        set_rotate_method(strategy or "allgather")  # the handler's default
        return context_parallel(
            self.mesh["cp"],
            buffers=buffers,
            buffer_seq_dims=seq_dims,
            no_restore_buffers=set(no_restore_buffers or ()),
        )


def shard_sequence(tensor: torch.Tensor, rank: int, size: int, dim: int = 1) -> torch.Tensor:
    """The ``rank``-th of ``size`` contiguous slices of ``tensor`` along ``dim`` (Ulysses SP's split).

    The length must be divisible by ``size``: DeepSpeed's sequence parallelism gives each
    rank of an SP group one contiguous part of every sequence.
    """
    length = tensor.shape[dim]
    if length % size:
        raise ValueError(
            f"sequence length {length} (dim {dim}) must be divisible by sp_size={size}"
        )
    return tensor.narrow(dim, rank * (length // size), length // size)


def load_balanced_indices(length: int, rank: int, size: int) -> torch.Tensor:
    """Sequence positions rank ``rank`` of ``size`` keeps under load-balanced context parallelism.

    The sequence is cut in ``2 * size`` chunks; rank ``r`` keeps chunks ``r`` and
    ``2 * size - 1 - r``, so that with causal attention every rank does as much work.
    """
    if length % (2 * size):
        raise ValueError(f"sequence length {length} must be divisible by 2 x cp_size = {2 * size}")
    chunk = length // (2 * size)
    first = torch.arange(rank * chunk, (rank + 1) * chunk)
    second = torch.arange((2 * size - 1 - rank) * chunk, (2 * size - rank) * chunk)
    return torch.cat([first, second])


def clip_grad_norm_(
    parameters: Iterable[torch.Tensor], max_norm: float, norm_type: float = 2.0
) -> torch.Tensor:
    """Clip gradients that mix DTensors (TP / FSDP shards, any meshes) and plain tensors.

    Gradients are grouped by kind (plain, or DTensor mesh and placements); each group's
    norm is computed with torch's ``get_total_norm`` and made global (``full_tensor``), the
    groups' norms are combined, and every gradient is scaled by the same factor. Returns
    the total norm (a plain tensor, equal on every process).
    """
    from torch.distributed.tensor import DTensor

    grads = [p.grad for p in parameters if p.grad is not None]
    if not grads:
        return torch.tensor(0.0)
    groups: dict[tuple[int, tuple[object, ...]] | None, list[torch.Tensor]] = {}
    for grad in grads:
        key = (id(grad.device_mesh), grad.placements) if isinstance(grad, DTensor) else None
        groups.setdefault(key, []).append(grad)
    norms = []
    for group in groups.values():
        norm = torch.nn.utils.get_total_norm(group, norm_type)
        norms.append((norm.full_tensor() if isinstance(norm, DTensor) else norm).float().cpu())
    total = torch.linalg.vector_norm(torch.stack(norms), norm_type)
    coefficient = float(max_norm) / (float(total) + 1e-6)
    if coefficient < 1.0:
        with torch.no_grad():
            for grad in grads:
                grad.mul_(coefficient)
    return total


def _gather_over(group: ProcessGroup | None, tensor: torch.Tensor) -> torch.Tensor:
    """Concatenate ``tensor`` from the ranks of ``group``, in group-rank order."""
    if tensor.ndim == 0:
        tensor = tensor[None]
    tensor = tensor.detach().contiguous()  # the gathered copy carries no autograd history
    parts = [torch.empty_like(tensor) for _ in range(dist.get_world_size(group))]
    dist.all_gather(parts, tensor, group=group)
    return torch.cat(parts, dim=0)


def _gather_uneven_over(group: ProcessGroup | None, tensor: torch.Tensor) -> torch.Tensor:
    """:func:`_gather_over` for first dimensions that differ across the ranks of ``group``."""
    if tensor.ndim == 0:
        tensor = tensor[None]
    sizes = _gather_over(group, torch.tensor([tensor.shape[0]], device=tensor.device)).tolist()
    longest = max(sizes)
    if longest == 0:  # empty everywhere
        return tensor
    if tensor.shape[0] < longest:
        padding = tensor.new_zeros((longest - tensor.shape[0], *tensor.shape[1:]))
        tensor = torch.cat([tensor, padding])
    chunks = _gather_over(group, tensor).split(longest)
    return torch.cat([chunk[:size] for chunk, size in zip(chunks, sizes)])


def _gather_object_over(group: ProcessGroup | None, obj: object) -> list[object]:
    """Every rank of ``group``'s ``obj`` in group-rank order; lists are concatenated."""
    everyone: list[object] = [None] * dist.get_world_size(group)
    dist.all_gather_object(everyone, obj, group=group)
    lists = [o for o in everyone if isinstance(o, list)]
    if len(lists) == len(everyone):
        return [x for o in lists for x in o]
    return everyone


_REDUCTIONS = ("sum", "mean", "max", "none")  # core's reduce: "none" sums without dividing


if TYPE_CHECKING:  # the mixin goes before a Backend, whose methods it extends
    from accel.backends import Backend as _MixedInto
else:
    _MixedInto = object


class NDParallelMixin(_MixedInto):
    """Layout-dependent steps of a backend using :class:`NDLayout` (``self.nd``, set in ``setup``).

    When TP / CP ranks hold copies of one batch, the collectives the Accelerator calls
    (``gather``, ``gather_object``, ``gather_uneven``, ``reduce``) run over the
    data-parallel group: one copy per data-parallel rank, in data-parallel-rank order,
    which is the order the loaders shard in.
    """

    nd: NDLayout | None = None
    """The layout, or None when the run has no parallelism config mesh."""

    def data_parallel_shard(self) -> tuple[int, int]:
        """Loaders (also dispatched ones) and ``split_between_processes`` shard over the
        data-parallel ranks only: TP / CP peers get the same data."""
        if self.nd is None:
            return super().data_parallel_shard()
        return self.nd.dp_size, self.nd.dp_rank

    def _copies(self) -> NDLayout | None:
        """The layout when TP / CP ranks hold copies of one batch, else None."""
        return self.nd if self.nd is not None and self.nd.has_copies else None

    def gather(self, tensor: TreeT) -> TreeT:
        """With TP / CP copies: concatenate over the data-parallel group (each sample once)."""
        nd = self._copies()
        if nd is None:
            return super().gather(tensor)
        from accel.distributed.operations import recursively_apply

        group = nd.dp_group()
        if group is None:
            return tensor
        # each tensor leaf becomes a tensor: the structure is still a TreeT
        gathered = recursively_apply(
            lambda t: _gather_over(group, t), tensor, error_on_other_type=True
        )
        return cast("TreeT", gathered)

    def gather_uneven(self, tensor: TreeT) -> TreeT:
        """With TP / CP copies: :meth:`gather` for first dimensions that differ across DP ranks."""
        nd = self._copies()
        if nd is None:
            return super().gather_uneven(tensor)
        from accel.distributed.operations import recursively_apply

        group = nd.dp_group()
        if group is None:
            return tensor
        # each tensor leaf becomes a tensor: the structure is still a TreeT
        gathered = recursively_apply(
            lambda t: _gather_uneven_over(group, t), tensor, error_on_other_type=True
        )
        return cast("TreeT", gathered)

    def gather_object(self, obj: object) -> list[object]:
        """With TP / CP copies: each data-parallel rank's ``obj`` once (lists concatenated)."""
        nd = self._copies()
        if nd is None:
            return super().gather_object(obj)
        group = nd.dp_group()
        if group is None:
            return obj if isinstance(obj, list) else [obj]
        return _gather_object_over(group, obj)

    def reduce(self, tensor: TreeT, reduction: str = "sum", scale: float = 1.0) -> TreeT:
        """With TP / CP copies: reduce over the data-parallel group (copies counted once).

        ``reduction`` as core's ``reduce``: ``sum``, ``mean`` (floor division for integers),
        ``max``, or ``none`` (a sum).
        """
        nd = self._copies()
        if nd is None:
            return super().reduce(tensor, reduction, scale)
        if reduction not in _REDUCTIONS:
            raise ValueError(
                f"reduce(reduction={reduction!r}): use one of {', '.join(_REDUCTIONS)}"
            )
        from accel.distributed.operations import recursively_apply

        group = nd.dp_group()
        size = nd.dp_size

        def one(t: torch.Tensor) -> torch.Tensor:
            out = t.clone()
            if group is not None:
                op = dist.ReduceOp.MAX if reduction == "max" else dist.ReduceOp.SUM
                dist.all_reduce(out, op=op, group=group)
            if reduction == "mean":
                out = out / size if out.is_floating_point() else out // size
            return out * scale if scale != 1.0 else out

        # `one` maps each tensor leaf to a tensor: the structure is still a TreeT
        return cast("TreeT", recursively_apply(one, tensor, error_on_other_type=True))

    def context_parallel(
        self,
        buffers: list[torch.Tensor] | None = None,
        buffer_seq_dims: list[int] | None = None,
        no_restore_buffers: set[torch.Tensor] | None = None,
    ) -> contextlib.AbstractContextManager:
        """:meth:`NDLayout.context_parallel` (a no-op without context parallelism)."""
        if self.nd is None:
            return contextlib.nullcontext()
        return self.nd.context_parallel(buffers, buffer_seq_dims, no_restore_buffers)


__all__ = [
    "NDLayout",
    "NDParallelMixin",
    "clip_grad_norm_",
    "load_balanced_indices",
    "model_tp_plan",
    "resolve_tp_plan",
    "shard_sequence",
    "tp_style",
]
