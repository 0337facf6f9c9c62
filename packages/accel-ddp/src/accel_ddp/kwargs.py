"""``DistributedDataParallelKwargs`` and ``DDPCommunicationHookType``."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, TypedDict, cast

from accel.kwargs import KwargsHandler

if TYPE_CHECKING:
    import torch
    from torch.nn.parallel import DistributedDataParallel


class DDPCommunicationHookType(str, enum.Enum):
    """Gradient communication hooks for DDP (``comm_hook``) and their wrappers (``comm_wrapper``)."""

    NO = "no"
    FP16 = "fp16"
    BF16 = "bf16"
    POWER_SGD = "power_sgd"
    BATCHED_POWER_SGD = "batched_power_sgd"

    def __str__(self) -> str:
        return self.value


class PowerSGDOptions(TypedDict, total=False):
    """``comm_state_option``: keyword arguments of ``torch``'s ``PowerSGDState``."""

    matrix_approximation_rank: int
    start_powerSGD_iter: int
    min_compression_rate: float
    use_error_feedback: bool
    warm_start: bool
    orthogonalization_epsilon: float
    random_seed: int
    compression_stats_logging_frequency: int
    batch_tensors_with_same_shape: bool


class DDPArguments(TypedDict, total=False):
    """The ``DistributedDataParallel`` arguments :meth:`DistributedDataParallelKwargs.ddp_kwargs` gives."""

    dim: int
    broadcast_buffers: bool
    bucket_cap_mb: int
    find_unused_parameters: bool
    check_reduction: bool
    gradient_as_bucket_view: bool
    static_graph: bool


@dataclass
class DistributedDataParallelKwargs(KwargsHandler):
    """Arguments of ``torch.nn.parallel.DistributedDataParallel`` plus a communication hook.

    ``comm_hook`` compresses (FP16/BF16) or approximates (POWER_SGD, BATCHED_POWER_SGD)
    the gradients sent; ``comm_wrapper`` (FP16/BF16) compresses PowerSGD's own traffic;
    ``comm_state_option`` is passed to ``PowerSGDState`` (``matrix_approximation_rank``,
    ``start_powerSGD_iter``, ...).
    """

    dim: int = 0
    broadcast_buffers: bool = True
    bucket_cap_mb: int = 25
    find_unused_parameters: bool = False
    check_reduction: bool = False
    gradient_as_bucket_view: bool = False
    static_graph: bool = False
    comm_hook: DDPCommunicationHookType = DDPCommunicationHookType.NO
    comm_wrapper: DDPCommunicationHookType = DDPCommunicationHookType.NO
    comm_state_option: PowerSGDOptions = field(default_factory=PowerSGDOptions)

    def __post_init__(self):
        self.comm_hook = DDPCommunicationHookType(self.comm_hook)
        self.comm_wrapper = DDPCommunicationHookType(self.comm_wrapper)
        if self.comm_wrapper not in (
            DDPCommunicationHookType.NO,
            DDPCommunicationHookType.FP16,
            DDPCommunicationHookType.BF16,
        ):
            raise ValueError(
                f"comm_wrapper={self.comm_wrapper.name}: use DDPCommunicationHookType.FP16 or BF16"
            )
        powersgd = (DDPCommunicationHookType.POWER_SGD, DDPCommunicationHookType.BATCHED_POWER_SGD)
        if self.comm_wrapper != DDPCommunicationHookType.NO and self.comm_hook not in powersgd:
            raise ValueError(
                "comm_wrapper wraps a PowerSGD hook: set comm_hook to POWER_SGD or BATCHED_POWER_SGD"
            )
        if self.comm_state_option and self.comm_hook not in powersgd:
            raise ValueError(
                "comm_state_option configures PowerSGD: set comm_hook to POWER_SGD or BATCHED_POWER_SGD"
            )

    def ddp_kwargs(self) -> DDPArguments:
        """The arguments for ``DistributedDataParallel`` itself that differ from its defaults."""
        names = (
            "dim",
            "broadcast_buffers",
            "bucket_cap_mb",
            "find_unused_parameters",
            "check_reduction",
            "gradient_as_bucket_view",
            "static_graph",
        )
        changed = self.to_kwargs()
        return cast("DDPArguments", {name: changed[name] for name in names if name in changed})

    def register_comm_hook(self, model: DistributedDataParallel) -> None:
        """Install the configured communication hook on a DDP ``model``."""
        if self.comm_hook == DDPCommunicationHookType.NO:
            return
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook

        hooks = {
            DDPCommunicationHookType.FP16: default_hooks.fp16_compress_hook,
            DDPCommunicationHookType.BF16: default_hooks.bf16_compress_hook,
            DDPCommunicationHookType.POWER_SGD: powerSGD_hook.powerSGD_hook,
            DDPCommunicationHookType.BATCHED_POWER_SGD: powerSGD_hook.batched_powerSGD_hook,
        }
        hook = hooks[self.comm_hook]
        if self.comm_hook == DDPCommunicationHookType.BATCHED_POWER_SGD:
            _accept_unbatched_orthogonalize(powerSGD_hook)
        state = None
        if self.comm_hook in (
            DDPCommunicationHookType.POWER_SGD,
            DDPCommunicationHookType.BATCHED_POWER_SGD,
        ):
            state = powerSGD_hook.PowerSGDState(process_group=None, **self.comm_state_option)
            wrappers = {
                DDPCommunicationHookType.FP16: default_hooks.fp16_compress_wrapper,
                DDPCommunicationHookType.BF16: default_hooks.bf16_compress_wrapper,
            }
            if self.comm_wrapper in wrappers:
                hook = wrappers[self.comm_wrapper](hook)
        model.register_comm_hook(state=state, hook=hook)


def _accept_unbatched_orthogonalize(module: ModuleType) -> None:
    """Let ``powerSGD_hook._orthogonalize`` take the 2-D matrix ``batched_powerSGD_hook`` passes.

    Recent torch releases made ``_orthogonalize`` require a batch of matrices while
    ``batched_powerSGD_hook`` still hands it one matrix, so the hook fails on its
    first call. The matrix is orthogonalised in place through a batch-of-one view.
    """
    original = module._orthogonalize
    if getattr(original, "_accel_unbatched", False):
        return

    def orthogonalize(matrices: torch.Tensor, epsilon: float = 0) -> torch.Tensor:
        if matrices.dim() == 2:
            return original(matrices.unsqueeze(0), epsilon=epsilon)
        return original(matrices, epsilon=epsilon)

    vars(orthogonalize)["_accel_unbatched"] = True  # the mark that this patch is in place
    setattr(module, "_orthogonalize", orthogonalize)  # noqa: B010 (ModuleType declares no _orthogonalize)
