"""``MegatronLMPlugin``: every Megatron-LM setting, from code, the ``megatron_lm_config`` section or flags.

Torch-free and megatron-free: values are validated and normalised here; megatron-core
objects are built by the backend.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, TypeVar, cast

from accel.config.options import Option, Section
from accel.config.strategy import Strategy
from accel.errors import ConfigError

if TYPE_CHECKING:
    from accel.backends import BackendContext
    from accel.precision import Precision
    from megatron.core.transformer import TransformerConfig

LR_DECAY_STYLES = ("constant", "linear", "cosine", "inverse-square-root", "WSD")
"""Learning-rate decay styles of megatron-core's ``OptimizerParamScheduler``."""
WD_INCR_STYLES = ("constant", "linear", "cosine")
"""Weight-decay increment styles of megatron-core's ``OptimizerParamScheduler``."""


def _check_section(values: Mapping[str, Any]) -> None:
    """The section's settings must fit together (as :class:`MegatronLMPlugin` checks them)."""
    MegatronLMPlugin(**{name.removeprefix("megatron_lm_"): v for name, v in values.items()})


MEGATRON_SECTION = Section(
    "megatron_lm_config",
    [
        Option("megatron_lm_tp_degree", int, 1, minimum=1, help="tensor-parallel degree"),
        Option("megatron_lm_pp_degree", int, 1, minimum=1, help="pipeline-parallel degree"),
        Option("megatron_lm_num_micro_batches", int, 1, minimum=1, help="micro-batches per step"),
        Option("megatron_lm_gradient_clipping", float, 1.0, minimum=0, help="max gradient norm"),
        Option("megatron_lm_sequence_parallelism", bool, False, help="sequence parallelism"),
        Option("megatron_lm_recompute_activations", bool, False, help="selective recomputation"),
        Option(
            "megatron_lm_use_distributed_optimizer",
            bool,
            False,
            help="shard optimizer states over the data-parallel group",
        ),
        Option(
            "megatron_lm_num_layers_per_virtual_pipeline_stage",
            int,
            minimum=1,
            help="layers per virtual pipeline stage",
        ),
        Option(
            "megatron_lm_lr_decay_style",
            default="linear",
            choices=LR_DECAY_STYLES,
            help="learning-rate decay",
        ),
        Option("megatron_lm_min_lr", float, 0.0, minimum=0, help="final learning rate"),
        Option("megatron_lm_start_weight_decay", float, minimum=0, help="initial weight decay"),
        Option("megatron_lm_end_weight_decay", float, minimum=0, help="final weight decay"),
        Option(
            "megatron_lm_weight_decay_incr_style",
            default="constant",
            choices=WD_INCR_STYLES,
            help="weight-decay increment",
        ),
        Option("megatron_lm_seed", int, 1234, help="model-parallel RNG seed"),
    ],
    title="Megatron-LM",
    checks=[_check_section],
)
"""The ``megatron_lm_config`` section: its keys, types, defaults and ``--megatron_lm_*`` flags."""

MEGATRON_STRATEGY = Strategy(
    MEGATRON_SECTION,
    "use_megatron_lm",
    help="train with Megatron-LM tensor/pipeline/sequence parallelism (accel-megatron)",
    question="Do you want to use Megatron-LM?",
)
"""``--use_megatron_lm`` and the ``accel config`` question that choose Megatron-LM."""

MEGATRON_CONFIG_KEYS: dict[str, str] = {
    option.name: f"{option.help}, {option.describe()}" for option in MEGATRON_SECTION
}
"""The keys of the ``megatron_lm_config`` section and what each accepts."""

validate_section = MEGATRON_SECTION.validate
"""Errors in a ``megatron_lm_config`` section (unknown keys, bad values, bad combinations)."""


_T = TypeVar("_T")


def filled(value: _T | None) -> _T:
    """A :class:`MegatronLMPlugin` field that ``__post_init__`` filled (every field with a
    declared default is; None would mean it was cleared afterwards)."""
    if value is None:
        raise ValueError("a MegatronLMPlugin setting with a default was set to None")
    return value


def _option(name: str) -> Option:
    return MEGATRON_SECTION[f"megatron_lm_{name}"]


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
    extra: dict[str, object] = field(default_factory=dict, repr=False)
    """Further megatron-core ``TransformerConfig`` fields applied by :meth:`transformer_config`."""
    global_batch_size: int | None = field(default=None, init=False)
    """Samples per optimizer step over all data-parallel ranks; set when a training loader is prepared."""
    micro_batch_size: int | None = field(default=None, init=False)
    """Samples per micro-batch on one data-parallel rank; set when a training loader is prepared."""
    _run = None  # not a field: the BackendContext of the Accelerator using the plugin (attach)

    def attach(self, run: BackendContext) -> None:
        """Called by the Megatron-LM backend with its run context (a ``BackendContext``): what
        the plugin's helpers need of the run (the mixed precision) is read there."""
        self._run = run

    def __getstate__(self) -> dict[str, object]:
        # A copy or a pickle of the plugin leaves the run (and its prepared model) behind.
        return {**self.__dict__, "_run": None}

    @property
    def mixed_precision(self) -> str:
        """The name of the run's precision (``no`` before the plugin is attached to a run)."""
        return self._run.mixed_precision if self._run is not None else "no"

    @property
    def precision(self) -> Precision | None:
        """The :class:`~accel.precision.Precision` of the run the plugin is attached to (None before)."""
        return self._run.precision if self._run is not None else None

    def __post_init__(self):
        section = MEGATRON_SECTION.read(defaults=False)  # the keys the launched config sets
        for f in fields(self):
            key = f"megatron_lm_{f.name}"
            if f.init and getattr(self, f.name) is None and key in section:
                setattr(self, f.name, section[key])
        for f in fields(self):
            if f"megatron_lm_{f.name}" in MEGATRON_SECTION:
                option = _option(f.name)
                value = option.convert(getattr(self, f.name), f.name)
                setattr(self, f.name, option.default if value is None else value)
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
        if filled(self.pp_degree) > 1 and filled(self.num_micro_batches) < 2:
            raise ConfigError(
                f"pp_degree={self.pp_degree} needs num_micro_batches > 1 (with one micro-batch the "
                "pipeline stages run one after another): set megatron_lm_num_micro_batches, "
                f"ideally >= {self.pp_degree}"
            )

    @property
    def model_parallel_size(self) -> int:
        """Processes holding one copy of the model: ``tp_degree * pp_degree``."""
        return filled(self.tp_degree) * filled(self.pp_degree)

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
            self.micro_batch_size * filled(self.num_micro_batches) * self.dp_degree(world_size)
        )
        return self.global_batch_size

    def transformer_config(
        self, mixed_precision: Precision | str = "no", **kwargs: object
    ) -> TransformerConfig:
        """A megatron-core ``TransformerConfig`` carrying this plugin's parallel settings.

        ``mixed_precision`` (a :class:`~accel.precision.Precision` or its name) gives the
        ``params_dtype`` and the ``bf16`` / ``fp16`` flags through its ``dtype``. ``kwargs`` give the model's shape (``num_layers``, ``hidden_size``,
        ``num_attention_heads``, ...) and override anything else; :attr:`extra` applies
        first. Imports megatron-core.
        """
        import torch
        from accel.precision import dtype_of
        from megatron.core.transformer import TransformerConfig

        dtype = dtype_of(mixed_precision)
        # Any: TransformerConfig's fields, each of its own type
        values: dict[str, Any] = {
            "tensor_model_parallel_size": self.tp_degree,
            "pipeline_model_parallel_size": self.pp_degree,
            "virtual_pipeline_model_parallel_size": None,
            "sequence_parallel": self.sequence_parallelism,
            "params_dtype": dtype,
            "pipeline_dtype": dtype,
            "bf16": dtype == torch.bfloat16,
            "fp16": dtype == torch.float16,
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
            layers = cast("int | None", kwargs.get("num_layers"))
            if layers:
                values["virtual_pipeline_model_parallel_size"] = layers // (
                    filled(self.pp_degree) * self.num_layers_per_virtual_pipeline_stage
                )
        values.update(self.extra)
        values.update(kwargs)
        return TransformerConfig(**values)
