"""The prepared model: each call runs megatron-core's forward-backward schedule over micro-batches."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, cast

import torch
import torch.distributed as dist

from .config import MegatronLMPlugin, filled
from .cpu import cpu_execution

if TYPE_CHECKING:
    from megatron.core.distributed import DistributedDataParallel


class MegatronLMOutput(dict[str, torch.Tensor]):
    """What the prepared model returns: ``loss`` (mean over micro-batches and the data-parallel group).

    Readable as ``out.loss`` or ``out["loss"]``; every rank holds the same value.
    """

    def __getattr__(self, name: str) -> torch.Tensor:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


def split_micro_batches(batch: object, count: int) -> list[torch.Tensor] | list[dict[str, object]]:
    """Cut every tensor of ``batch`` (a tensor or a mapping) into ``count`` equal parts along dim 0."""
    if isinstance(batch, torch.Tensor):
        size = batch.shape[0]
    elif isinstance(batch, Mapping):
        sizes = {v.shape[0] for v in batch.values() if isinstance(v, torch.Tensor) and v.dim()}
        if len(sizes) != 1:
            raise ValueError(
                "a Megatron-LM batch must be a tensor or a mapping of tensors sharing one batch size"
            )
        size = sizes.pop()
    else:
        raise TypeError(
            f"a Megatron-LM batch must be a tensor or a mapping of tensors, not {type(batch).__name__}"
        )
    if size % count:
        raise ValueError(
            f"batch of {size} samples cannot be cut into megatron_lm_num_micro_batches={count} "
            "equal micro-batches: use a batch size that is a multiple of it (drop_last=True helps)"
        )
    step = size // count
    if isinstance(batch, torch.Tensor):
        return list(batch.split(step))
    parts: list[dict[str, object]] = [{} for _ in range(count)]
    for key, value in batch.items():
        pieces = (
            value.split(step)
            if isinstance(value, torch.Tensor) and value.dim()
            else [value] * count
        )
        for part, piece in zip(parts, pieces):
            part[key] = piece
    return parts


def gpt_inputs(micro_batch: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Inputs of a megatron-core GPTModel for a causal-LM micro-batch ``{"input_ids", ["labels"], ["attention_mask"]}``.

    Micro-batches of megatron-core's GPTDataset (``tokens``, ``labels``, ``loss_mask``,
    ``position_ids``, ``attention_mask``) are used as they are.

    Without ``labels`` the model learns to predict the next token (the last position,
    and positions whose next token is padding, are masked out of the loss);
    ``attention_mask`` (1 = real token) masks padding out of the loss.
    """
    if "tokens" in micro_batch:  # megatron-core's GPTDataset format (MegatronLMDummyDataLoader)
        return _megatron_format(micro_batch)
    tokens = micro_batch["input_ids"]
    batch_size, length = tokens.shape
    loss_mask = torch.ones_like(tokens, dtype=torch.float32)
    labels = micro_batch.get("labels")
    padding = micro_batch.get("attention_mask")
    if labels is None:
        labels = torch.roll(tokens, -1, dims=1)
        loss_mask[:, -1] = 0.0
        if padding is not None:  # position i is scored on token i + 1
            padding = torch.roll(padding, -1, dims=1)
    else:
        labels = labels.clone()
        ignored = labels < 0
        labels[ignored] = 0
        loss_mask[ignored] = 0.0
    if padding is not None:
        loss_mask = loss_mask * padding.to(torch.float32)
    position_ids = torch.arange(length, device=tokens.device).unsqueeze(0).expand(batch_size, -1)
    causal = torch.triu(torch.ones(1, 1, length, length, device=tokens.device), diagonal=1).bool()
    return {
        "input_ids": tokens,
        "position_ids": position_ids,
        "attention_mask": causal,
        "labels": labels,
        "loss_mask": loss_mask,
    }


def _megatron_format(micro_batch: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    tokens = micro_batch["tokens"]
    length = tokens.shape[1]
    mask = micro_batch.get("attention_mask")
    if mask is None:
        mask = torch.triu(torch.ones(1, 1, length, length, device=tokens.device), diagonal=1).bool()
    return {
        "input_ids": tokens,
        "position_ids": micro_batch["position_ids"],
        "attention_mask": mask,
        "labels": micro_batch["labels"],
        "loss_mask": micro_batch["loss_mask"].to(torch.float32),
    }


def _is_gpt(module: torch.nn.Module) -> bool:
    from megatron.core.models.gpt import GPTModel

    return isinstance(module, GPTModel)


class MegatronEngine(torch.nn.Module):
    """A megatron-core model (wrapped in megatron-core's DistributedDataParallel) driven by its schedules.

    In training mode with gradients enabled, ``model(**batch)`` cuts the batch into
    ``num_micro_batches`` micro-batches and runs forward and backward for all of them
    through megatron-core's forward-backward function (pipelined when
    ``pp_degree > 1``); gradients are reduced over the data-parallel group and wait in
    megatron-core's buffers for ``optimizer.step()``. Otherwise it runs the same schedule
    forward only. Either way it returns a :class:`MegatronLMOutput` whose ``loss`` is
    already averaged over the micro-batches and the data-parallel group.
    """

    def __init__(self, module: DistributedDataParallel, plugin: MegatronLMPlugin, on_cpu: bool):
        super().__init__()
        self.module: DistributedDataParallel = module
        self.plugin = plugin
        self.on_cpu = on_cpu

    @property
    def inner(self) -> torch.nn.Module:
        """The user's megatron-core model, without megatron-core's DistributedDataParallel."""
        return getattr(self.module, "module", self.module)

    def zero_grad_buffer(self) -> None:
        """Clear the gradients accumulated in megatron-core's buffers."""
        self.module.zero_grad_buffer()

    def forward(self, *args: object, **kwargs: object) -> MegatronLMOutput:
        """One step over a batch (``model(**batch)``, ``model(batch)`` or ``model(tensor)``)."""
        if args and kwargs:
            raise TypeError("pass the batch either as keyword arguments or as one argument")
        batch = kwargs if kwargs else (args[0] if len(args) == 1 else None)
        if batch is None:
            raise TypeError("the prepared Megatron-LM model takes one batch")
        forward_only = not (self.training and torch.is_grad_enabled())
        return self.run_schedule(batch, forward_only)

    def run_schedule(self, batch: object, forward_only: bool) -> MegatronLMOutput:
        """Run megatron-core's forward-backward function over ``batch`` cut into micro-batches."""
        from megatron.core import parallel_state as ps
        from megatron.core.pipeline_parallel import get_forward_backward_func

        count = self.plugin.num_micro_batches
        micro_batches = split_micro_batches(batch, filled(count))
        first = micro_batches[0]
        if isinstance(first, torch.Tensor):
            sample = first
        else:
            found = first.get("input_ids", first.get("tokens"))
            if found is None:
                found = next(v for v in first.values() if isinstance(v, torch.Tensor) and v.dim())
            sample = cast("torch.Tensor", found)  # a batch's input ids are a tensor
        seq_length = sample.shape[1] if sample.dim() > 1 else 1
        schedule = get_forward_backward_func()
        with cpu_execution(self.on_cpu):
            stored = schedule(
                forward_step_func=self._forward_step,
                data_iterator=iter(micro_batches),
                model=[self.module],
                num_microbatches=count,
                seq_length=seq_length,
                micro_batch_size=sample.shape[0],
                forward_only=forward_only,
            )
        loss = torch.zeros((), dtype=torch.float32)
        if ps.is_pipeline_last_stage(ignore_virtual=True):
            loss = torch.stack([item["loss"].float().cpu() for item in stored]).mean()
            if ps.get_data_parallel_world_size() > 1:
                loss = loss.clone()
                dist.all_reduce(loss, group=ps.get_data_parallel_group())
                loss /= ps.get_data_parallel_world_size()
        if ps.get_pipeline_model_parallel_world_size() > 1:
            dist.broadcast(
                loss,
                src=ps.get_pipeline_model_parallel_last_rank(),
                group=ps.get_pipeline_model_parallel_group(),
            )
        return MegatronLMOutput(loss=loss)

    def _forward_step(
        self, data_iterator: Iterator[torch.Tensor | dict[str, object]], model: torch.nn.Module
    ) -> tuple[object, Callable[[torch.Tensor], tuple[torch.Tensor, dict[str, torch.Tensor]]]]:
        micro_batch = next(data_iterator)
        if _is_gpt(self.inner):
            # a causal-LM micro-batch: a mapping of tensors (gpt_inputs)
            inputs = gpt_inputs(cast("Mapping[str, torch.Tensor]", micro_batch))
            loss_mask = inputs.pop("loss_mask")
            output = model(
                inputs["input_ids"],
                inputs["position_ids"],
                inputs["attention_mask"],
                labels=inputs["labels"],
            )

            def gpt_loss(per_token: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
                mask = loss_mask.to(per_token.device)
                loss = (per_token.float() * mask).sum() / mask.sum().clamp(min=1.0)
                return loss, {"loss": loss.detach().clone()}

            return output, gpt_loss
        output = model(**micro_batch) if isinstance(micro_batch, Mapping) else model(micro_batch)
        custom = self.plugin.custom_loss_function

        def module_loss(out: object) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
            if custom is not None:
                loss = custom(out, micro_batch)
            else:
                loss = getattr(out, "loss", None)
                if loss is None and isinstance(out, Mapping):
                    loss = out.get("loss")
                if loss is None:
                    loss = out
            if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
                raise TypeError(
                    "the model must return a scalar loss (or an output with .loss); otherwise give "
                    "MegatronLMPlugin(custom_loss_function=fn(output, batch))"
                )
            loss = loss.reshape(()).clone()  # the schedule scales it in place
            return loss, {"loss": loss.detach().clone()}

        return output, module_loss
