"""DeepSpeed sequence parallelism (ALST / Ulysses): ``ParallelismConfig(sp_size=N, sp_backend="deepspeed")``.

The processes are cut in groups of ``sp_size`` consecutive ranks (DeepSpeed's
``parallel_state_sp`` groups): the ranks of one group read the same batch, each keeps
one contiguous slice of every sequence, and Ulysses attention exchanges heads for
sequence with an all-to-all, so that each rank attends over the whole sequence for
``num_heads / sp_size`` heads. The data-parallel size is ``world_size / sp_size``.

This module holds the pieces the backend composes: :func:`check_layout` (the
validation), :func:`initialize_groups` / :func:`register_attention` (the ``mpu`` given
to ``deepspeed.initialize``), :class:`SequenceSlicingCollate` (each rank's slice of
every batch) and :func:`sequence_parallel_loss` (the token-weighted average of the
group's losses).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar, cast

import torch
from accel.errors import ConfigError

from .hf_config import JSONValue

if TYPE_CHECKING:
    from accel import ParallelismConfig

LoaderT = TypeVar("LoaderT", bound="torch.utils.data.DataLoader")

IGNORE_INDEX = -100
"""Label value that takes no part in the loss (transformers' and torch's default)."""


@dataclass(frozen=True)
class SequenceParallelLayout:
    """Where this process sits: ``sp_size`` consecutive ranks form one sequence-parallel group."""

    sp_size: int
    world_size: int
    rank: int

    @property
    def sp_rank(self) -> int:
        """This process's rank inside its sequence-parallel group (which slice it keeps)."""
        return self.rank % self.sp_size

    @property
    def dp_size(self) -> int:
        """How many different batches one step sees: ``world_size / sp_size``."""
        return self.world_size // self.sp_size

    @property
    def dp_rank(self) -> int:
        """Which of those batches this process's group reads."""
        return self.rank // self.sp_size

    @property
    def group_ranks(self) -> list[int]:
        """The global ranks of this process's sequence-parallel group."""
        first = self.dp_rank * self.sp_size
        return list(range(first, first + self.sp_size))


class SequenceParallelOptions(Protocol):
    """The options of DeepSpeed sequence parallelism a ``ParallelismConfig`` holds as its
    ``sp_handler`` (core's ``DeepSpeedSequenceParallelConfig``)."""

    sp_seq_length: int | None
    sp_seq_length_is_variable: bool | None
    sp_attn_implementation: str | None


def sp_options(config: ParallelismConfig | None) -> SequenceParallelOptions:
    """The ``sp_handler`` of a sequence-parallel ``ParallelismConfig`` (its ``__post_init__``
    makes one whenever ``sp_size > 1``)."""
    handler = None if config is None else config.sp_handler
    if handler is None:
        raise ConfigError(
            "DeepSpeed sequence parallelism needs a ParallelismConfig with sp_size > 1 and "
            "sp_backend='deepspeed'"
        )
    return handler


def fixed_sequence_length(config: ParallelismConfig | None) -> int | None:
    """``sp_seq_length`` when every batch must have it (``sp_seq_length_is_variable=False``), else None."""
    handler = sp_options(config)
    return None if handler.sp_seq_length_is_variable else handler.sp_seq_length


class _HasBackend(Protocol):
    """What :func:`ulysses_dl_adapter` reads of the accelerator it is given."""

    @property
    def backend(self) -> object:
        """The run's backend (DeepSpeed's holds the sequence-parallel layout)."""
        ...

    @property
    def state(self) -> object:
        """The run's state (holding the ``parallelism_config``)."""
        ...


class _AttentionConfig(Protocol):
    """What Ulysses reads of a transformers ``PretrainedConfig``."""

    _attn_implementation: str | None


def _size(value: int | None) -> int:
    """A ``ParallelismConfig`` size, which its ``__post_init__`` made a whole number (None: 1)."""
    return 1 if value is None else value


def check_layout(
    config: ParallelismConfig,
    world_size: int,
    rank: int,
    deepspeed_config: Mapping[str, JSONValue],
) -> SequenceParallelLayout:
    """Validate a sequence-parallel ``ParallelismConfig`` for a DeepSpeed run; the layout, or ConfigError.

    ``sp_size`` must divide the number of processes; tensor / context parallelism and
    DeepSpeed's AutoTP do not combine with it; ``dp_replicate_size x dp_shard_size``, when
    not 1, must be the data-parallel size ``world_size / sp_size`` (ZeRO shards over all
    processes either way); a fixed ``sp_seq_length`` must be divisible by ``sp_size``.
    """
    sp = _size(config.sp_size)
    if sp > world_size or world_size % sp:
        raise ConfigError(
            f"sp_size={sp} must divide the number of processes ({world_size}): each group of "
            f"sp_size consecutive processes shares one batch"
        )
    if _size(config.tp_size) > 1 or _size(config.cp_size) > 1:
        raise ConfigError(
            f"DeepSpeed sequence parallelism (sp_size={sp}) does not combine with tp_size="
            f"{config.tp_size} / cp_size={config.cp_size}: set them to 1"
        )
    autotp = (deepspeed_config.get("tensor_parallel") or {}).get("autotp_size", 0)
    if isinstance(autotp, int) and autotp > 1:
        raise ConfigError(
            f"DeepSpeed sequence parallelism (sp_size={sp}) does not combine with AutoTP "
            f"(tensor_parallel.autotp_size={autotp} in the DeepSpeed config)"
        )
    dp = _size(config.dp_replicate_size) * _size(config.dp_shard_size)
    if dp not in (1, world_size // sp):
        raise ConfigError(
            f"dp_replicate_size={config.dp_replicate_size} x dp_shard_size={config.dp_shard_size} "
            f"x sp_size={sp} must equal the number of processes ({world_size}): with DeepSpeed "
            f"the data-parallel size is {world_size} / {sp} = {world_size // sp}"
        )
    declared = deepspeed_config.get("sequence_parallel_size")
    if isinstance(declared, int) and declared != sp:
        raise ConfigError(
            f"the DeepSpeed config says sequence_parallel_size={declared} but the "
            f"ParallelismConfig says sp_size={sp}: set it in one place"
        )
    handler = config.sp_handler
    length = getattr(handler, "sp_seq_length", None)
    variable = getattr(handler, "sp_seq_length_is_variable", True)
    if not variable and isinstance(length, int) and length % sp:
        raise ConfigError(f"sp_seq_length={length} must be divisible by sp_size={sp}")
    return SequenceParallelLayout(sp, world_size, rank)


def initialize_groups(sp_size: int) -> object:
    """DeepSpeed's sequence-parallel groups (``parallel_state_sp``, the ``mpu``), made once per process."""
    import deepspeed
    import deepspeed.runtime.sequence_parallel.parallel_state_sp as mpu

    deepspeed.init_distributed()  # deepspeed.comm over the existing torch process group
    try:
        group = mpu.get_sequence_parallel_group()
    except AssertionError:
        mpu.initialize_sequence_parallel(sequence_parallel_size=sp_size)
        return mpu
    size = torch.distributed.get_world_size(group)
    if size != sp_size:
        raise ConfigError(
            f"this process already has DeepSpeed sequence-parallel groups of {size} ranks: "
            f"sp_size={sp_size} cannot change within one process"
        )
    return mpu


def is_transformers_model(model: torch.nn.Module) -> bool:
    """Whether ``model`` carries a transformers config (its attention can be swapped for Ulysses)."""
    config = getattr(model, "config", None)
    return config is not None and hasattr(config, "_attn_implementation")


RECURRENT_LAYER_TYPES = ("linear_attention", "mamba", "hybrid")
"""Kinds of layers (in a transformers config's ``layer_types`` or ``layers_block_type``) that
carry a state along the sequence: linear attention and Mamba blocks, alone or beside attention."""


def refuse_recurrent_layers(model: torch.nn.Module) -> None:
    """Refuse a model whose layers carry a recurrent state along the sequence.

    Ulysses gives each rank the whole sequence only inside the attention interface it
    wraps; a linear-attention or Mamba layer runs its own recurrence over the rank's slice,
    restarted from zero on every rank and never exchanged, so the gradients would be wrong
    without any error (the first slice's output is even right). Accelerate refuses
    ``linear_attention`` layers; accel also refuses ``mamba`` and ``hybrid`` ones
    (FalconH1, Zamba2), which hold the same kind of state.
    """
    config = getattr(model, "config", None)
    if config is not None and hasattr(config, "get_text_config"):
        config = config.get_text_config()
    kinds = {
        str(kind)
        for field in ("layer_types", "layers_block_type")
        for kind in getattr(config, field, None) or ()
    }
    recurrent = sorted(k for k in kinds if any(r in k for r in RECURRENT_LAYER_TYPES))
    if recurrent:
        raise ConfigError(
            f"DeepSpeed sequence parallelism cannot train {type(model).__name__}: its layers of "
            f"type {recurrent} carry a state along the sequence that Ulysses does not exchange, "
            "so every rank would restart it and the gradients would be wrong without an error; "
            "use a model with attention layers only, or sp_size=1"
        )


_registered: dict[str, object] = {}
"""The attention implementation swapped for Ulysses in this process -> the mpu (at most one)."""


def register_attention(
    model: torch.nn.Module, handler: SequenceParallelOptions, sp_size: int, micro_batch_size: int
) -> object:
    """Route ``model``'s attention through DeepSpeed's Ulysses all-to-all; returns the mpu.

    ``handler.sp_attn_implementation`` (default: the model's own, which must not be
    ``eager``) is replaced in transformers' attention registry by Ulysses around it,
    as ``UlyssesSPAttentionHF.register_with_transformers`` does; this happens once per
    process (the registry is global), later models must use the same implementation.
    A model with recurrent layers is refused first (:func:`refuse_recurrent_layers`).
    """
    import inspect

    refuse_recurrent_layers(model)
    from deepspeed.runtime.sequence_parallel.ulysses_sp import UlyssesSPAttentionHF

    model_config = cast("_AttentionConfig", model.config)  # a transformers PretrainedConfig
    own = model_config._attn_implementation
    impl = handler.sp_attn_implementation or own
    if impl != own:
        raise ConfigError(
            f"sp_attn_implementation={impl!r} but the model was built with attn_implementation="
            f"{own!r}: build the model with attn_implementation={impl!r}"
        )
    if impl in (None, "eager", "flex_attention"):
        raise ConfigError(
            f"the model's attention implementation {impl!r} does not work with DeepSpeed sequence "
            "parallelism: build it with attn_implementation='sdpa' (or flash_attention_2 / 3)"
        )
    if _registered:
        (done,) = _registered
        if done != impl:
            raise ConfigError(
                f"Ulysses attention is already registered for {done!r} in this process; "
                f"a second model cannot use {impl!r}"
            )
        return _registered[done]
    import deepspeed
    import deepspeed.runtime.sequence_parallel.parallel_state_sp as mpu

    deepspeed.init_distributed()
    try:  # groups made for an earlier (non-transformers) model: register_with_transformers remakes them
        mpu.get_sequence_parallel_group()
        mpu._release_sequence_parallel_groups()
    except AssertionError:
        pass
    kwargs: dict[str, bool] = {}
    if (
        "disable_in_eval"
        in inspect.signature(UlyssesSPAttentionHF.register_with_transformers).parameters
    ):
        kwargs["disable_in_eval"] = True
    result = UlyssesSPAttentionHF.register_with_transformers(
        model_name_or_path=model,
        core_attn_implementation=impl,
        sequence_parallel_size=sp_size,
        micro_batch_size=micro_batch_size,
        seq_length=handler.sp_seq_length,
        seq_length_is_variable=handler.sp_seq_length_is_variable,
        **kwargs,
    )
    _registered[impl] = result
    return result


def shard_sequence(tensor: torch.Tensor, rank: int, size: int) -> torch.Tensor:
    """The ``rank``-th of ``size`` contiguous slices of ``tensor`` along dimension 1 (the sequence)."""
    return tensor[:, (tensor.shape[1] // size) * rank : (tensor.shape[1] // size) * (rank + 1)]


def slice_batch(
    batch: Mapping[str, object], sp_rank: int, sp_size: int, seq_length: int | None = None
) -> dict[str, object]:
    """This rank's part of a dict batch of ``[batch, sequence, ...]`` tensors.

    Adds ``position_ids`` (``0 .. length-1`` per sample) when absent and ``shift_labels``
    (``labels`` shifted left by one, padded with -100) before cutting, so that the last
    token of a slice is scored against the first token of the next; then every tensor
    of 2 or more dimensions is cut along dimension 1. Other values are kept as they are.
    """
    ids = batch.get("input_ids")
    if not torch.is_tensor(ids):
        raise ValueError(
            "DeepSpeed sequence parallelism needs dict batches with an input_ids tensor "
            f"[batch, sequence]; got keys {sorted(batch)}"
        )
    length = ids.shape[1]
    if seq_length is not None and length != seq_length:
        raise ValueError(
            f"batch sequence length {length} is not sp_seq_length={seq_length} "
            "(sp_seq_length_is_variable=False): pad every batch to it"
        )
    if length % sp_size:
        raise ValueError(
            f"batch sequence length {length} must be divisible by sp_size={sp_size}: pad the "
            "sequences to a multiple of it"
        )
    full = dict(batch)
    if "position_ids" not in full:
        full["position_ids"] = torch.arange(length, device=ids.device).expand(ids.shape[0], -1)
    labels = full.get("labels")
    if torch.is_tensor(labels) and "shift_labels" not in full:
        padded = torch.nn.functional.pad(labels, (0, 1), value=IGNORE_INDEX)
        full["shift_labels"] = padded[..., 1:].contiguous()
    result: dict[str, object] = {}
    for key, value in full.items():
        if torch.is_tensor(value) and value.dim() >= 2:
            if value.shape[1] != length:
                raise ValueError(
                    f"batch[{key!r}] has shape {tuple(value.shape)}: every tensor of 2+ dimensions "
                    f"must be [batch, sequence={length}, ...] to be cut along the sequence"
                )
            value = shard_sequence(value, sp_rank, sp_size).contiguous()
        result[key] = value
    return result


class SequenceSlicingCollate:
    """A collate function that gives each rank of a sequence-parallel group its slice (picklable)."""

    def __init__(
        self,
        collate_fn: Callable[[list[object]], object],
        sp_rank: int,
        sp_size: int,
        seq_length: int | None = None,
    ):
        self.collate_fn = collate_fn
        self.sp_rank = sp_rank
        self.sp_size = sp_size
        self.seq_length = seq_length

    def __call__(self, samples: list[object]) -> object:
        """Collate ``samples``, then :func:`slice_batch` (non-dict results pass through unchanged)."""
        batch = self.collate_fn(samples)
        if isinstance(batch, Mapping):
            return slice_batch(batch, self.sp_rank, self.sp_size, self.seq_length)
        if torch.is_tensor(batch) or isinstance(batch, (list, tuple)):
            raise TypeError(
                "DeepSpeed sequence parallelism needs dict batches (input_ids, labels, "
                f"position_ids, ...), not {type(batch).__name__}"
            )
        return batch


def sequence_parallel_group() -> torch.distributed.ProcessGroup:
    """This process's sequence-parallel process group (made by ``accelerator.prepare(model)``)."""
    import deepspeed.runtime.sequence_parallel.parallel_state_sp as mpu

    try:
        return mpu.get_sequence_parallel_group()
    except AssertionError:
        raise RuntimeError(
            "no DeepSpeed sequence-parallel groups yet: they are made by accelerator.prepare(model) "
            "with ParallelismConfig(sp_size > 1) under DeepSpeed"
        ) from None


def sequence_parallel_loss(
    loss: torch.Tensor,
    shift_labels: torch.Tensor,
    group: torch.distributed.ProcessGroup | None = None,
    ignore_index: int = IGNORE_INDEX,
) -> torch.Tensor:
    """The mean loss over the whole sequences of a sequence-parallel group, weighted by tokens.

    ``loss`` is this rank's mean over its slice's non-ignored tokens (what a transformers
    model returns), ``shift_labels`` the slice's labels. Every rank returns the same
    value, ``sum(loss_r * tokens_r) / sum(tokens_r)`` (a rank without tokens adds 0); the
    gradient flows through this rank's own term only, so the group's gradients add up to
    the gradient of the full-sequence loss. ``group`` defaults to
    :func:`sequence_parallel_group`.
    """
    if group is None:
        group = sequence_parallel_group()
    tokens = (shift_labels != ignore_index).sum().to(loss.dtype)
    own = torch.where(tokens > 0, loss, torch.zeros_like(loss)) * tokens
    pair = torch.stack([own.detach(), tokens]).reshape(1, 2)
    everyone = [torch.empty_like(pair) for _ in range(torch.distributed.get_world_size(group))]
    torch.distributed.all_gather(everyone, pair.contiguous(), group=group)
    totals = torch.cat(everyone).sum(dim=0)
    others = totals[0] - own.detach()
    return (own + others) / totals[1].clamp(min=1)


def ulysses_dl_adapter(
    accelerator: _HasBackend, dataloader: LoaderT, model: object = None
) -> LoaderT:
    """``dataloader`` giving this rank its slice of every batch under DeepSpeed sequence parallelism.

    What Accelerate's ``Accelerator.deepspeed_ulysses_dl_adapter(dl, model)`` does, for a loader
    prepared apart from the model (transformers' Trainer calls it after ``prepare(model)``).
    Without sequence parallelism (``sp_size`` 1, or not the DeepSpeed backend) the loader is
    returned unchanged; a loader accel prepared under sequence parallelism already cuts its
    batches and is returned unchanged too; any other gets the slicing collate function.
    ``model`` is accepted for Accelerate's signature (the slices stay on the loader's device).
    """
    layout = getattr(accelerator.backend, "sequence_parallel", None)
    # a state reset after training has no parallelism_config: then there is no layout either
    config = getattr(accelerator.state, "parallelism_config", None)
    return slice_loader(layout, config, dataloader)


def slice_loader(
    layout: SequenceParallelLayout | None,
    parallelism_config: ParallelismConfig | None,
    dataloader: LoaderT,
) -> LoaderT:
    """``dataloader`` cutting each batch to this rank's slice under ``layout`` (set by
    ``parallelism_config``); unchanged without sequence parallelism (see :func:`ulysses_dl_adapter`)."""
    if not isinstance(layout, SequenceParallelLayout) or layout.sp_size == 1:
        return dataloader
    collate = getattr(dataloader, "collate_fn", None)
    if isinstance(collate, SequenceSlicingCollate):
        return dataloader
    if collate is None:
        raise TypeError(
            "deepspeed_ulysses_dl_adapter needs a data loader with a collate_fn (a torch "
            f"DataLoader or a loader from accelerator.prepare), not {type(dataloader).__name__}"
        )
    fixed = fixed_sequence_length(parallelism_config)
    dataloader.collate_fn = SequenceSlicingCollate(collate, layout.sp_rank, layout.sp_size, fixed)
    return dataloader
