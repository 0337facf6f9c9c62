"""``MegatronLMPlugin``: every Megatron-LM setting, from code, the ``megatron_lm_config`` section or flags.

Torch-free and megatron-free: values are validated and normalised here; megatron-core
objects are built by the backend.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from accel.errors import ConfigError
from accel.utils.config_keys import parse_bool as _bool

LR_DECAY_STYLES = ("constant", "linear", "cosine", "inverse-square-root", "WSD")
"""Learning-rate decay styles of megatron-core's ``OptimizerParamScheduler``."""
WD_INCR_STYLES = ("constant", "linear", "cosine")
"""Weight-decay increment styles of megatron-core's ``OptimizerParamScheduler``."""


def _positive_int(key: str, value: Any) -> int:
    try:
        number = int(str(value).strip()) if not isinstance(value, int) else value
    except (TypeError, ValueError):
        raise ConfigError(f"{key}={value!r} is not an integer: use a whole number >= 1") from None
    if isinstance(number, bool) or number < 1:
        raise ConfigError(f"{key}={value!r} must be a whole number >= 1")
    return number


def _float(key: str, value: Any, minimum: float = 0.0) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{key}={value!r} is not a number") from None
    if number < minimum:
        raise ConfigError(f"{key}={value!r} must be >= {minimum}")
    return number


def _choice(key: str, value: Any, allowed: tuple[str, ...]) -> str:
    text = str(value).strip()
    for option in allowed:
        if text.lower() == option.lower():
            return option
    raise ConfigError(f"{key}={value!r} is not allowed: use one of {', '.join(allowed)}")


@dataclass
class MegatronLMPlugin:
    """How a model is split with Megatron-LM (megatron-core): tensor, pipeline and sequence parallelism.

    Unset fields come from the ``megatron_lm_config`` section chosen by ``accel launch``
    (keys ``megatron_lm_<field>``), else the defaults below. ``tp_degree * pp_degree``
    processes hold one copy of the model; the world size divided by it is the
    data-parallel degree. ``global_batch_size`` is known once a training data loader is
    prepared: micro-batch size x ``num_micro_batches`` x data-parallel degree.
    """

    tp_degree: int | None = None
    """Tensor-parallel degree: each layer's weights are split over this many processes (1)."""
    pp_degree: int | None = None
    """Pipeline-parallel degree: the layers are cut into this many stages (1)."""
    num_micro_batches: int | None = None
    """Micro-batches per training step, run through megatron-core's schedule (1)."""
    gradient_clipping: float | None = None
    """Clip the global gradient norm to this value (1.0; 0 disables)."""
    sequence_parallelism: bool | None = None
    """Split layer norms and dropout along the sequence over the tensor-parallel group (needs tp_degree > 1)."""
    recompute_activations: bool | None = None
    """Recompute the attention core in backward instead of storing it (selective recomputation)."""
    use_distributed_optimizer: bool | None = None
    """Shard optimizer states over the data-parallel group (megatron-core's DistributedOptimizer)."""
    num_layers_per_virtual_pipeline_stage: int | None = None
    """Layers per virtual stage: enables the interleaved pipeline schedule (needs pp_degree > 1)."""
    lr_decay_style: str | None = None
    """``MegatronLMDummyScheduler`` decay: constant, linear, cosine, inverse-square-root or WSD (linear)."""
    min_lr: float | None = None
    """Learning rate at the end of the decay (0.0)."""
    start_weight_decay: float | None = None
    """Weight decay at the first step (the optimizer's weight decay)."""
    end_weight_decay: float | None = None
    """Weight decay at the last step (the optimizer's weight decay)."""
    weight_decay_incr_style: str | None = None
    """How weight decay moves from start to end: constant, linear or cosine (constant)."""
    seed: int | None = None
    """Seed of megatron-core's model-parallel RNG tracker (1234)."""
    custom_loss_function: Callable | None = None
    """``fn(output, batch) -> loss``: the loss of a micro-batch for models returning no loss themselves."""
    extra: dict[str, Any] = field(default_factory=dict, repr=False)
    """Further megatron-core ``TransformerConfig`` fields applied by :meth:`transformer_config`."""
    global_batch_size: int | None = field(default=None, init=False)
    """Samples per optimizer step over all data-parallel ranks; set when a training loader is prepared."""
    micro_batch_size: int | None = field(default=None, init=False)
    """Samples per micro-batch on one data-parallel rank; set when a training loader is prepared."""

    def __post_init__(self):
        section = _launched_section()
        for f in fields(self):
            if f.init and getattr(self, f.name) is None and f"megatron_lm_{f.name}" in section:
                setattr(self, f.name, section[f"megatron_lm_{f.name}"])
        self.tp_degree = _positive_int("tp_degree", 1 if self.tp_degree is None else self.tp_degree)
        self.pp_degree = _positive_int("pp_degree", 1 if self.pp_degree is None else self.pp_degree)
        self.num_micro_batches = _positive_int(
            "num_micro_batches", 1 if self.num_micro_batches is None else self.num_micro_batches
        )
        self.gradient_clipping = _float(
            "gradient_clipping", 1.0 if self.gradient_clipping is None else self.gradient_clipping
        )
        for name in ("sequence_parallelism", "recompute_activations", "use_distributed_optimizer"):
            value = getattr(self, name)
            setattr(self, name, False if value is None else _bool(name, value))
        if self.num_layers_per_virtual_pipeline_stage is not None:
            self.num_layers_per_virtual_pipeline_stage = _positive_int(
                "num_layers_per_virtual_pipeline_stage", self.num_layers_per_virtual_pipeline_stage
            )
        self.lr_decay_style = _choice(
            "lr_decay_style", self.lr_decay_style or "linear", LR_DECAY_STYLES
        )
        self.weight_decay_incr_style = _choice(
            "weight_decay_incr_style", self.weight_decay_incr_style or "constant", WD_INCR_STYLES
        )
        self.min_lr = _float("min_lr", 0.0 if self.min_lr is None else self.min_lr)
        for name in ("start_weight_decay", "end_weight_decay"):
            if getattr(self, name) is not None:
                setattr(self, name, _float(name, getattr(self, name)))
        self.seed = 1234 if self.seed is None else int(self.seed)
        self._check_combinations()

    def _check_combinations(self) -> None:
        if self.sequence_parallelism and self.tp_degree == 1:
            raise ConfigError(
                "sequence_parallelism=true needs tp_degree > 1 (it splits along the sequence over "
                "the tensor-parallel group): raise megatron_lm_tp_degree or turn sequence parallelism off"
            )
        if self.num_layers_per_virtual_pipeline_stage is not None and self.pp_degree == 1:
            raise ConfigError(
                "num_layers_per_virtual_pipeline_stage needs pp_degree > 1: set megatron_lm_pp_degree"
            )
        if self.pp_degree > 1 and self.num_micro_batches < 2:
            raise ConfigError(
                f"pp_degree={self.pp_degree} needs num_micro_batches > 1 (with one micro-batch the "
                "pipeline stages run one after another): set megatron_lm_num_micro_batches, "
                f"ideally >= {self.pp_degree}"
            )

    @property
    def model_parallel_size(self) -> int:
        """Processes holding one copy of the model: ``tp_degree * pp_degree``."""
        return self.tp_degree * self.pp_degree

    def dp_degree(self, world_size: int) -> int:
        """The data-parallel degree for ``world_size`` processes, or a ConfigError naming the keys to fix."""
        if world_size % self.model_parallel_size:
            raise ConfigError(
                f"megatron_lm_tp_degree={self.tp_degree} x megatron_lm_pp_degree={self.pp_degree} = "
                f"{self.model_parallel_size} does not divide the {world_size} processes: choose degrees "
                f"whose product divides num_processes"
            )
        return world_size // self.model_parallel_size

    def set_batch_sizes(self, micro_batch_size: int, world_size: int) -> int:
        """Record the micro-batch size and compute ``global_batch_size`` (returned)."""
        self.micro_batch_size = int(micro_batch_size)
        self.global_batch_size = (
            self.micro_batch_size * self.num_micro_batches * self.dp_degree(world_size)
        )
        return self.global_batch_size

    def transformer_config(self, mixed_precision: str = "no", **kwargs: Any) -> Any:
        """A megatron-core ``TransformerConfig`` carrying this plugin's parallel settings.

        ``kwargs`` give the model's shape (``num_layers``, ``hidden_size``,
        ``num_attention_heads``, ...) and override anything else; :attr:`extra` applies
        first. Imports megatron-core.
        """
        import torch
        from megatron.core.transformer import TransformerConfig

        dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(mixed_precision, torch.float32)
        values: dict[str, Any] = {
            "tensor_model_parallel_size": self.tp_degree,
            "pipeline_model_parallel_size": self.pp_degree,
            "virtual_pipeline_model_parallel_size": None,
            "sequence_parallel": self.sequence_parallelism,
            "params_dtype": dtype,
            "pipeline_dtype": dtype,
            "bf16": mixed_precision == "bf16",
            "fp16": mixed_precision == "fp16",
            "use_cpu_initialization": not torch.cuda.is_available(),
            "gradient_accumulation_fusion": False,
            "bias_activation_fusion": False,
            "bias_dropout_fusion": False,
            "masked_softmax_fusion": False,
            "persist_layer_norm": False,
            "apply_rope_fusion": False,
        }
        if self.recompute_activations:
            values["recompute_granularity"] = "selective"
        if self.num_layers_per_virtual_pipeline_stage is not None:
            layers = kwargs.get("num_layers")
            if layers:
                values["virtual_pipeline_model_parallel_size"] = layers // (
                    self.pp_degree * self.num_layers_per_virtual_pipeline_stage
                )
        values.update(self.extra)
        values.update(kwargs)
        return TransformerConfig(**values)


def _launched_section() -> Mapping[str, Any]:
    from accel.utils.config import launched_config

    return launched_config().get("megatron_lm_config") or {}


MEGATRON_CONFIG_KEYS: dict[str, str] = {
    "megatron_lm_tp_degree": "tensor-parallel degree, an integer >= 1",
    "megatron_lm_pp_degree": "pipeline-parallel degree, an integer >= 1",
    "megatron_lm_num_micro_batches": "micro-batches per step, an integer >= 1",
    "megatron_lm_gradient_clipping": "max gradient norm, a number >= 0",
    "megatron_lm_sequence_parallelism": "true/false",
    "megatron_lm_recompute_activations": "true/false",
    "megatron_lm_use_distributed_optimizer": "true/false",
    "megatron_lm_num_layers_per_virtual_pipeline_stage": "an integer >= 1",
    "megatron_lm_lr_decay_style": ", ".join(LR_DECAY_STYLES),
    "megatron_lm_min_lr": "a number >= 0",
    "megatron_lm_start_weight_decay": "a number >= 0",
    "megatron_lm_end_weight_decay": "a number >= 0",
    "megatron_lm_weight_decay_incr_style": ", ".join(WD_INCR_STYLES),
    "megatron_lm_seed": "an integer",
}
"""The keys of the ``megatron_lm_config`` section and what each accepts."""

_CHECKS: dict[str, Callable[[str, Any], Any]] = {
    "tp_degree": _positive_int,
    "pp_degree": _positive_int,
    "num_micro_batches": _positive_int,
    "num_layers_per_virtual_pipeline_stage": _positive_int,
    "gradient_clipping": _float,
    "min_lr": _float,
    "start_weight_decay": _float,
    "end_weight_decay": _float,
    "sequence_parallelism": _bool,
    "recompute_activations": _bool,
    "use_distributed_optimizer": _bool,
    "lr_decay_style": lambda k, v: _choice(k, v, LR_DECAY_STYLES),
    "weight_decay_incr_style": lambda k, v: _choice(k, v, WD_INCR_STYLES),
    "seed": lambda k, v: _float(k, v, minimum=float("-inf")),
}


def validate_section(section: Mapping[str, Any]) -> list[str]:
    """Errors in a ``megatron_lm_config`` section (unknown keys, bad values, bad combinations), one line each."""
    if not isinstance(section, Mapping):
        return [
            f"megatron_lm_config must be a mapping of megatron_lm_* keys, not {type(section).__name__}"
        ]
    errors: list[str] = []
    for key, value in section.items():
        if key not in MEGATRON_CONFIG_KEYS:
            errors.append(
                f"megatron_lm_config.{key} is not a Megatron-LM setting: allowed keys are "
                f"{', '.join(MEGATRON_CONFIG_KEYS)}"
            )
            continue
        try:
            _CHECKS[key.removeprefix("megatron_lm_")](key, value)
        except ConfigError as error:
            errors.append(f"megatron_lm_config.{key}: {error}")
    if not errors and section:
        try:
            MegatronLMPlugin(**{k.removeprefix("megatron_lm_"): v for k, v in section.items()})
        except ConfigError as error:
            errors.append(f"megatron_lm_config: {error}")
    return errors
