"""``MegatronLMDummyScheduler``: a placeholder that ``prepare`` turns into megatron-core's scheduler."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from accel.scheduler import AcceleratedScheduler

from .config import MegatronLMPlugin, filled

if TYPE_CHECKING:
    import torch
    from megatron.core.optimizer import MegatronOptimizer
    from megatron.core.optimizer_param_scheduler import OptimizerParamScheduler

    from .optimizer import MegatronLMOptimizerWrapper


class MegatronLMDummyScheduler:
    """Stands for megatron-core's ``OptimizerParamScheduler`` until ``accelerator.prepare``.

    ``total_num_steps`` (alias ``num_training_steps``) optimizer steps, the first
    ``warmup_num_steps`` (alias ``num_warmup_steps``) warming the learning rate up
    linearly; the decay style, minimum learning rate and weight-decay schedule come
    from the :class:`MegatronLMPlugin`.
    """

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        total_num_steps: int | None = None,
        warmup_num_steps: int = 0,
        **kwargs: object,
    ):
        # transformers' names for the two counts
        if total_num_steps is None:
            total_num_steps = cast("int | None", kwargs.pop("num_training_steps", None))
        if "num_warmup_steps" in kwargs:
            warmup_num_steps = cast("int", kwargs.pop("num_warmup_steps"))
        if total_num_steps is None or int(total_num_steps) < 1:
            raise ValueError(
                "MegatronLMDummyScheduler needs total_num_steps (or num_training_steps) >= 1"
            )
        if int(warmup_num_steps) < 0 or int(warmup_num_steps) > int(total_num_steps):
            raise ValueError(
                f"MegatronLMDummyScheduler: warmup_num_steps={warmup_num_steps} must lie in "
                f"[0, total_num_steps={total_num_steps}]"
            )
        self.optimizer = optimizer
        self.total_num_steps = int(total_num_steps)
        self.warmup_num_steps = int(warmup_num_steps)
        self.kwargs = kwargs

    def state_dict(self) -> dict:
        """The settings (a placeholder has no progress to save)."""
        return {"total_num_steps": self.total_num_steps, "warmup_num_steps": self.warmup_num_steps}

    def step(self, *args: object, **kwargs: object) -> None:
        """Refuse: only the prepared scheduler steps."""
        raise RuntimeError(
            "MegatronLMDummyScheduler is a placeholder: step the scheduler returned by accelerator.prepare"
        )


def build_param_scheduler(
    dummy: MegatronLMDummyScheduler, megatron_optimizer: MegatronOptimizer, plugin: MegatronLMPlugin
) -> OptimizerParamScheduler:
    """megatron-core's ``OptimizerParamScheduler`` for ``dummy`` over ``megatron_optimizer``."""
    from megatron.core.optimizer_param_scheduler import OptimizerParamScheduler

    config = megatron_optimizer.config
    lr = cast("float", config.lr)  # optimizer_config always sets it
    weight_decay = config.weight_decay
    start_wd = plugin.start_weight_decay if plugin.start_weight_decay is not None else weight_decay
    end_wd = plugin.end_weight_decay if plugin.end_weight_decay is not None else weight_decay
    return OptimizerParamScheduler(
        megatron_optimizer,
        init_lr=0.0 if dummy.warmup_num_steps else lr,
        max_lr=lr,
        min_lr=filled(plugin.min_lr),
        lr_warmup_steps=dummy.warmup_num_steps,
        lr_decay_steps=dummy.total_num_steps,
        lr_decay_style=filled(plugin.lr_decay_style),
        start_wd=start_wd,
        end_wd=end_wd,
        wd_incr_steps=dummy.total_num_steps,
        wd_incr_style=filled(plugin.weight_decay_incr_style),
    )


class MegatronLMSchedulerWrapper(AcceleratedScheduler):
    """megatron-core's ``OptimizerParamScheduler`` behind ``step`` / ``get_last_lr`` / ``state_dict``.

    Each ``step()`` advances it by one optimizer step (the micro-batches of a step are
    already inside the prepared model's forward).
    """

    def __init__(
        self,
        scheduler: OptimizerParamScheduler,
        optimizers: list[MegatronLMOptimizerWrapper | None],
    ):
        super().__init__(scheduler, optimizers, step_with_optimizer=False)

    def step(self, *args: object, **kwargs: object) -> None:
        """Advance the learning-rate and weight-decay schedule by one step."""
        self.scheduler.step(increment=1)

    def get_last_lr(self) -> list[float]:
        """The learning rate of every parameter group."""
        return [group["lr"] for group in self.scheduler.optimizer.param_groups]

    def state_dict(self) -> dict:
        """The scheduler's progress and settings."""
        return self.scheduler.state_dict()

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore the scheduler's progress (and the learning rate it implies)."""
        self.scheduler.num_steps = 0  # megatron-core adds the saved steps to the current count
        self.scheduler.load_state_dict(state_dict)
