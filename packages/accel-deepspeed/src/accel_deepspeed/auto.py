"""Filling a DeepSpeed config's ``"auto"`` values, in one place, recording where each came from.

:func:`fill_auto` takes the config and an :class:`AutoContext` (what the Accelerator
and the prepared objects say) and returns the filled config plus one
:class:`Filled` record per value it set. An ``"auto"`` it cannot resolve is a
:class:`~accel.errors.ConfigError` naming the key and how to set it. Torch-free.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from accel.errors import ConfigError

from .config import half_precision_sections
from .hf_config import DeepSpeedConfig, JSONValue

if TYPE_CHECKING:
    from accel.precision import Precision

logger = logging.getLogger("accel_deepspeed.auto")

HIDDEN_SIZE_KEYS = (
    "zero_optimization.reduce_bucket_size",
    "zero_optimization.stage3_prefetch_bucket_size",
    "zero_optimization.stage3_param_persistence_threshold",
)
"""Keys derived from the model's hidden size, as in Accelerate."""

_HOW_TO_SET = {
    "train_micro_batch_size_per_gpu": "pass a data loader with an integer batch_size to "
    "accelerator.prepare(), or write an integer for train_micro_batch_size_per_gpu in the DeepSpeed config",
    "scheduler.params.total_num_steps": "pass DummyScheduler(optimizer, total_num_steps=N) to "
    "accelerator.prepare(), or write an integer for scheduler.params.total_num_steps in the DeepSpeed config",
    "optimizer.params.lr": "pass an optimizer (or DummyOptim(params, lr=...)) to accelerator.prepare(), "
    "or write a number for optimizer.params.lr in the DeepSpeed config",
}


@dataclass
class Filled:
    """One ``"auto"`` value that was filled: the dotted key, the value and where it came from."""

    key: str
    value: JSONValue
    source: str

    def __str__(self) -> str:
        return f"{self.key} = {self.value!r} (auto: {self.source})"


@dataclass
class AutoContext:
    """Everything ``"auto"`` values may be filled from."""

    num_processes: int = 1
    gradient_accumulation_steps: int = 1
    gradient_accumulation_source: str = "Accelerator(gradient_accumulation_steps=...)"
    micro_batch_size: int | None = None
    micro_batch_source: str = ""
    precision: Precision | str = "no"
    """The run's :class:`~accel.precision.Precision` (or a ``mixed_precision`` name)."""
    gradient_clipping: float | None = None
    zero3_save_16bit_model: bool = False
    optimizer_values: dict[str, JSONValue] = field(default_factory=dict)
    optimizer_source: str = ""
    total_num_steps: int | None = None
    warmup_num_steps: int | None = None
    scheduler_source: str = ""
    hidden_size: int | None = None
    hidden_size_source: str = ""


def auto_keys(config: JSONValue, prefix: str = "") -> list[str]:
    """Every dotted key whose value is ``"auto"``."""
    found: list[str] = []
    if isinstance(config, dict):
        for key, value in config.items():
            dotted = f"{prefix}{key}"
            if value == "auto":
                found.append(dotted)
            elif isinstance(value, dict):
                found += auto_keys(value, dotted + ".")
    return found


def _get(config: DeepSpeedConfig, dotted: str) -> JSONValue:
    node: JSONValue = config
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _set(config: DeepSpeedConfig, dotted: str, value: JSONValue) -> None:
    *parents, last = dotted.split(".")
    node = config
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value


def _precision(config: DeepSpeedConfig, ctx: AutoContext, filled: list[Filled]) -> None:
    """fp16 / bf16 sections: ``auto`` or absent follow the run's precision
    (:func:`~accel_deepspeed.config.half_precision_sections`); explicit ones must agree with it."""
    wanted = half_precision_sections(ctx.precision)
    name = str(getattr(ctx.precision, "name", ctx.precision))
    for section in ("fp16", "bf16"):
        value = config.get(section)
        enabled = value.get("enabled") if isinstance(value, dict) else None
        if enabled == "auto" or (enabled is None and wanted[section]):
            _set(config, f"{section}.enabled", wanted[section])
            filled.append(
                Filled(f"{section}.enabled", wanted[section], f"mixed_precision={name!r}")
            )
        elif enabled is True and any(wanted.values()) and not wanted[section]:
            raise ConfigError(
                f"the DeepSpeed config enables {section} but mixed_precision is {name!r}: "
                f"set mixed_precision {section} (or no), or {section}.enabled to false or auto in the DeepSpeed config"
            )
    if _get(config, "fp16.enabled") is True and _get(config, "bf16.enabled") is True:
        raise ConfigError(
            "the DeepSpeed config enables both fp16 and bf16: set one of them to false"
        )


def _batch_sizes(config: DeepSpeedConfig, ctx: AutoContext, filled: list[Filled]) -> None:
    world, steps = ctx.num_processes, ctx.gradient_accumulation_steps
    micro, total = (
        config.get("train_micro_batch_size_per_gpu"),
        config.get("train_batch_size"),
    )
    if config.get("gradient_accumulation_steps") == "auto":
        config["gradient_accumulation_steps"] = steps
        filled.append(
            Filled("gradient_accumulation_steps", steps, ctx.gradient_accumulation_source)
        )
    steps = config.get("gradient_accumulation_steps", steps)
    if micro == "auto" or micro is None:
        if isinstance(total, int):
            config["train_micro_batch_size_per_gpu"] = total // (steps * world)
            filled.append(
                Filled(
                    "train_micro_batch_size_per_gpu",
                    total // (steps * world),
                    f"train_batch_size {total} / (gradient_accumulation_steps {steps} x {world} processes)",
                )
            )
        elif ctx.micro_batch_size is not None:
            config["train_micro_batch_size_per_gpu"] = ctx.micro_batch_size
            filled.append(
                Filled(
                    "train_micro_batch_size_per_gpu", ctx.micro_batch_size, ctx.micro_batch_source
                )
            )
        elif micro == "auto":
            return  # reported as unresolvable
    elif ctx.micro_batch_size is not None and micro != ctx.micro_batch_size:
        logger.warning(
            "train_micro_batch_size_per_gpu is %s in the DeepSpeed config but the data loader yields "
            "%s per process; the config's value is used for DeepSpeed's bookkeeping",
            micro,
            ctx.micro_batch_size,
        )
    micro = config.get("train_micro_batch_size_per_gpu")
    if total == "auto" and isinstance(micro, int):
        config["train_batch_size"] = micro * steps * world
        filled.append(
            Filled(
                "train_batch_size",
                micro * steps * world,
                f"train_micro_batch_size_per_gpu {micro} x gradient_accumulation_steps {steps} x {world} processes",
            )
        )


def _simple_values(ctx: AutoContext) -> dict[str, tuple[JSONValue, str]]:
    """Values that depend on nothing else in the config: ``{key: (value or None, source)}``."""
    clip = ctx.gradient_clipping
    values: dict[str, tuple[JSONValue, str]] = {
        "gradient_clipping": (
            (clip, "DeepSpeedPlugin(gradient_clipping=...)")
            if clip is not None
            else (1.0, "default 1.0 (Accelerate's); set gradient_clipping to change it")
        ),
        "zero_optimization.stage3_gather_16bit_weights_on_model_save": (
            ctx.zero3_save_16bit_model,
            "DeepSpeedPlugin(zero3_save_16bit_model=...)",
        ),
        "scheduler.params.total_num_steps": (ctx.total_num_steps, ctx.scheduler_source),
        "scheduler.params.warmup_num_steps": (ctx.warmup_num_steps, ctx.scheduler_source),
        "scheduler.params.warmup_min_lr": (0, "default 0"),
    }
    lr = ctx.optimizer_values.get("lr")
    values["scheduler.params.warmup_max_lr"] = (lr, f"{ctx.optimizer_source} lr")
    for name, value in ctx.optimizer_values.items():
        values[f"optimizer.params.{name}"] = (value, ctx.optimizer_source)
    hidden = ctx.hidden_size
    if hidden is not None:
        why = f"{ctx.hidden_size_source} = {hidden}"
        values[HIDDEN_SIZE_KEYS[0]] = (hidden * hidden, f"hidden_size x hidden_size ({why})")
        values[HIDDEN_SIZE_KEYS[1]] = (
            int(0.9 * hidden * hidden),
            f"0.9 x hidden_size x hidden_size ({why})",
        )
        values[HIDDEN_SIZE_KEYS[2]] = (10 * hidden, f"10 x hidden_size ({why})")
    return values


def fill_auto(config: DeepSpeedConfig, ctx: AutoContext) -> tuple[DeepSpeedConfig, list[Filled]]:
    """A copy of ``config`` with every ``"auto"`` filled, and the record of what was filled.

    Raises :class:`ConfigError` listing every ``"auto"`` that cannot be resolved.
    """
    config = copy.deepcopy(config)
    filled: list[Filled] = []
    _precision(config, ctx, filled)
    _batch_sizes(config, ctx, filled)
    simple = _simple_values(ctx)
    unresolved: list[str] = []
    for key in auto_keys(config):
        value, source = simple.get(key, (None, ""))
        if value is None:
            unresolved.append(key)
            continue
        _set(config, key, value)
        filled.append(Filled(key, value, source))
    if unresolved:
        raise ConfigError(
            "cannot fill these DeepSpeed config values set to auto: "
            + "; ".join(f"{key}: {_how_to_set(key)}" for key in unresolved)
        )
    for record in filled:
        logger.info("DeepSpeed config: %s", record)
    return config, filled


def _how_to_set(key: str) -> str:
    if key in _HOW_TO_SET:
        return _HOW_TO_SET[key]
    if key in HIDDEN_SIZE_KEYS:
        return (
            "the model has no config.hidden_size (or config.hidden_sizes) to derive it from; "
            "write an integer for it in the DeepSpeed config"
        )
    return "nothing in accel fills it automatically; write a value for it in the DeepSpeed config"
