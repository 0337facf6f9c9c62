"""The user's torch optimizer, rebuilt as a megatron-core optimizer over the prepared model."""

from __future__ import annotations

from collections import ChainMap
from typing import TYPE_CHECKING, Any, cast

import torch
from accel.errors import ConfigError
from accel.faults import preemption
from accel.optimizer import AcceleratedOptimizer
from accel.precision import dtype_of

from .config import MegatronLMPlugin, filled

if TYPE_CHECKING:
    from accel.precision import Precision
    from megatron.core.optimizer import MegatronOptimizer, OptimizerConfig

    from .engine import MegatronEngine

_KINDS = {"Adam": "adam", "AdamW": "adam", "SGD": "sgd"}


def optimizer_config(
    optimizer: torch.optim.Optimizer,
    plugin: MegatronLMPlugin,
    precision: Precision | str,
    on_cpu: bool,
) -> OptimizerConfig:
    """megatron-core's ``OptimizerConfig`` equivalent to ``optimizer`` and the plugin's settings.

    ``precision`` (the run's :class:`~accel.precision.Precision`, or a name) gives the
    ``params_dtype`` and the ``bf16`` / ``fp16`` flags through its ``dtype``.

    Adam, AdamW (decoupled weight decay, megatron-core's ``adam``) and SGD are
    translated with their learning rate, weight decay, betas, eps and momentum. On CPU,
    megatron-core's clipping asserts CUDA gradients, so ``clip_grad`` is 0 there and
    :class:`MegatronLMOptimizerWrapper` clips instead.
    """
    from megatron.core.optimizer import OptimizerConfig

    kind = _KINDS.get(type(optimizer).__name__)
    if kind is None:
        raise ConfigError(
            f"MEGATRON_LM rebuilds the optimizer with megatron-core, which offers Adam/AdamW and SGD; "
            f"got {type(optimizer).__name__}: create torch.optim.AdamW, Adam or SGD"
        )
    if on_cpu and plugin.use_distributed_optimizer:
        raise ConfigError(
            "megatron_lm_use_distributed_optimizer=true needs CUDA: megatron-core's DistributedOptimizer "
            "accepts only torch.cuda tensors; on CPU set it to false"
        )
    dtype = dtype_of(precision)
    if on_cpu and dtype != torch.float32:
        name = getattr(precision, "name", precision)
        raise ConfigError(
            f"mixed_precision={name} under MEGATRON_LM needs CUDA: megatron-core's "
            "Float16 optimizer accepts only torch.cuda tensors; on CPU use mixed_precision=no"
        )
    group = optimizer.param_groups[0]
    # Any: OptimizerConfig's fields, each of its own type
    values: dict[str, Any] = {
        "optimizer": kind,
        "lr": float(group["lr"]),
        "min_lr": plugin.min_lr,
        "weight_decay": float(group.get("weight_decay", 0.0)),
        "clip_grad": 0.0 if on_cpu else plugin.gradient_clipping,
        "bf16": dtype == torch.bfloat16,
        "fp16": dtype == torch.float16,
        "params_dtype": dtype,
        "use_distributed_optimizer": plugin.use_distributed_optimizer,
    }
    if kind == "adam":
        beta1, beta2 = group.get("betas", (0.9, 0.999))
        values.update(adam_beta1=beta1, adam_beta2=beta2, adam_eps=group.get("eps", 1e-8))
        if type(optimizer).__name__ == "Adam" and values["weight_decay"]:
            values["decoupled_weight_decay"] = False
    else:
        values["sgd_momentum"] = float(group.get("momentum", 0.0))
    return OptimizerConfig(**values)


def sgd_init_state_fn(optimizer: torch.optim.Optimizer, config: object = None) -> None:
    """Give every parameter of an SGD ``optimizer`` with momentum a zero ``momentum_buffer``.

    megatron-core calls its wrapper's ``init_state_fn`` before building the template that
    ``dist_checkpointing.load`` fills (``sharded_state_dict(..., is_loading=True)``), so that
    a fresh optimizer has the tensors a checkpoint holds. ``get_megatron_optimizer`` builds one
    for Adam only and leaves SGD's as ``None``. Without momentum, SGD keeps no state. A zero
    buffer steps like a missing one (megatron-core's SGD has no dampening: ``0 * m + g = g``).
    """
    for group in optimizer.param_groups:
        if not group.get("momentum", 0.0):
            continue
        for param in group["params"]:
            state = optimizer.state[param]
            if state.get("momentum_buffer") is None:
                state["momentum_buffer"] = torch.zeros_like(param.data)


def install_init_state_fn(megatron_optimizer: MegatronOptimizer, config: OptimizerConfig) -> None:
    """Give the SGD wrappers inside ``megatron_optimizer`` the ``init_state_fn`` megatron-core leaves out.

    Every wrapper (one, or each of a ``ChainedOptimizer``'s) calls it when a checkpoint is
    loaded; Adam's, built by megatron-core, are kept.
    """
    if config.optimizer != "sgd":
        return
    for wrapper in getattr(megatron_optimizer, "chained_optimizers", [megatron_optimizer]):
        if getattr(wrapper, "init_state_fn", None) is None:
            wrapper.init_state_fn = sgd_init_state_fn


def clip_on_cpu(megatron_optimizer: MegatronOptimizer, max_norm: float) -> float:
    """Clip the gradients the optimizer will use to a global norm of ``max_norm``; return the norm.

    Call after ``prepare_grads()`` (which moves megatron-core's gradient buffers into
    ``.grad``). The norm covers every parameter once: ``get_main_grads_for_grad_norm``
    leaves out tensor-parallel duplicates and shared embeddings, and the squared sum is
    reduced over the optimizer's model-parallel group, as megatron-core does on GPUs.
    """
    import torch.distributed as dist

    optimizers = getattr(megatron_optimizer, "chained_optimizers", [megatron_optimizer])
    grads_for_norm = [g for o in optimizers for g in o.get_main_grads_for_grad_norm()]
    total = torch.zeros(1, dtype=torch.float64)
    for grad in grads_for_norm:
        total += grad.detach().double().pow(2).sum()
    group = optimizers[0].get_grad_stats_parallel_group()
    if dist.is_initialized():
        dist.all_reduce(total, group=group)
    norm = float(total.sqrt())
    if max_norm > 0:
        coefficient = max_norm / (norm + 1.0e-6)
        if coefficient < 1.0:
            for o in optimizers:
                for param in o.get_parameters():
                    if param.grad is not None:
                        param.grad.mul_(coefficient)
    return norm


class MegatronLMOptimizerWrapper(AcceleratedOptimizer):
    """A megatron-core optimizer behind the usual ``step`` / ``zero_grad`` / ``state_dict``.

    ``step`` clips to ``gradient_clipping`` and updates the parameters from the gradients
    the last training forward accumulated (over all its micro-batches); ``zero_grad``
    clears megatron-core's gradient buffers.
    """

    def __init__(
        self,
        optimizer: MegatronOptimizer,
        model: MegatronEngine,
        plugin: MegatronLMPlugin,
        on_cpu: bool,
    ):
        # megatron-core's optimizer is no torch Optimizer subclass; it has the interface read here
        super().__init__(cast("torch.optim.Optimizer", optimizer))
        self.model = model
        self.plugin = plugin
        self.on_cpu = on_cpu
        self.grad_norm: float | None = None
        """Global gradient norm of the last step (before clipping)."""

    @property
    def megatron_optimizer(self) -> MegatronOptimizer:
        """The megatron-core optimizer this wraps (:attr:`optimizer`)."""
        return cast("MegatronOptimizer", self.optimizer)

    @property
    def state(self) -> Any:  # type: ignore[override]
        """Per-parameter state keyed by parameter, as on a torch optimizer.

        A megatron-core ``ChainedOptimizer``'s own ``state`` is keyed by ``(index, param)``
        and has no ``values()``; here its optimizers' states are chained into one mapping.
        """
        optimizers = getattr(self.optimizer, "chained_optimizers", None)
        if optimizers is None:
            return self.optimizer.state
        return ChainMap(*(o.state for o in optimizers))

    @state.setter
    def state(self, value: Any) -> None:
        self.optimizer.state = value

    def step(self, closure: Any = None) -> Any:  # as AcceleratedOptimizer.step (torch overloads it)
        """Clip and update; with fp16, a step skipped for overflow is recorded in ``step_was_skipped``."""
        from .cpu import cpu_execution

        preemption.step_done()  # the next batch is a point where ranks may agree to stop
        megatron_optimizer = self.megatron_optimizer
        with cpu_execution(self.on_cpu):
            if self.on_cpu:
                megatron_optimizer.prepare_grads()
                self.grad_norm = clip_on_cpu(
                    megatron_optimizer, filled(self.plugin.gradient_clipping)
                )
                self._is_overflow = not megatron_optimizer.step_with_ready_grads()
            else:
                success, grad_norm, _ = megatron_optimizer.step()
                self._is_overflow = not success
                self.grad_norm = grad_norm
        return None

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clear the gradient buffers of the model and of the optimizer."""
        self.model.zero_grad_buffer()
        self.optimizer.zero_grad(set_to_none=set_to_none)

    def __repr__(self) -> str:
        return f"MegatronLMOptimizerWrapper({type(self.optimizer).__name__})"
