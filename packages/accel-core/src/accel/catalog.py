"""The one table of what exists in accel and which package provides it.

Every list of distributed types, device kinds, precisions, trackers, quantizers,
config sections and plugin-owned public names in accel reads this module: the
``DistributedType`` enum, config-key validation, the process state's choice of a
process-group backend, device-map placement, and the "install this package" errors
raised when a feature's plugin is absent. It imports nothing, so anything may read it.

Which *installed* plugin serves a name is decided elsewhere (the registry, over the
hooks); this table only knows what first-party accel offers and where it lives.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Provided:
    """One thing accel knows about: its name, a human description and the distribution providing it."""

    name: str
    feature: str
    package: str


def _table(*rows: Provided) -> dict[str, Provided]:
    return {row.name: row for row in rows}


CORE = "accel-core"
"""The distribution of this module."""

DISTRIBUTED_TYPES: dict[str, Provided] = _table(
    Provided("NO", "one process", CORE),
    Provided("MULTI_CPU", "multi-process training", "accel-ddp"),
    Provided("MULTI_GPU", "multi-GPU training", "accel-ddp"),
    Provided("MULTI_NPU", "multi-NPU training", "accel-ddp"),
    Provided("MULTI_MLU", "multi-MLU training", "accel-ddp"),
    Provided("MULTI_SDAA", "multi-SDAA training", "accel-ddp"),
    Provided("MULTI_MUSA", "multi-MUSA training", "accel-ddp"),
    Provided("MULTI_XPU", "multi-XPU training", "accel-ddp"),
    Provided("MULTI_HPU", "multi-HPU training", "accel-ddp"),
    Provided("MULTI_NEURON", "multi-Neuron training", "accel-ddp"),
    Provided("DEEPSPEED", "DeepSpeed", "accel-deepspeed"),
    Provided("FSDP", "FSDP", "accel-fsdp"),
    Provided("XLA", "XLA (TPU)", "accel-tpu"),
    Provided("MEGATRON_LM", "Megatron-LM", "accel-megatron"),
)
"""Every ``distributed_type``, in Accelerate's order (``TPU`` is an alias of ``XLA``)."""

DISTRIBUTED_TYPE_ALIASES: dict[str, str] = {"TPU": "XLA"}
"""Older names read as another distributed type."""

DATA_PARALLEL_TYPES: tuple[str, ...] = tuple(n for n in DISTRIBUTED_TYPES if n.startswith("MULTI_"))
"""The plain data-parallel types: one per device kind, chosen from the world size and device."""


@dataclass(frozen=True)
class DeviceKind:
    """An accelerator family torch may expose as ``torch.<name>``."""

    name: str
    distributed_type: str
    process_group_backend: str


DEVICE_KINDS: dict[str, DeviceKind] = {
    kind.name: kind
    for kind in (
        DeviceKind("cuda", "MULTI_GPU", "nccl"),
        DeviceKind("xpu", "MULTI_XPU", "xccl"),
        DeviceKind("npu", "MULTI_NPU", "hccl"),
        DeviceKind("mlu", "MULTI_MLU", "cncl"),
        DeviceKind("musa", "MULTI_MUSA", "mccl"),
        DeviceKind("sdaa", "MULTI_SDAA", "tccl"),
        DeviceKind("hpu", "MULTI_HPU", "hccl"),
        DeviceKind("neuron", "MULTI_NEURON", "xla"),
    )
}
"""Accelerator device kinds in the order accel probes them (CPU and MPS are not listed)."""

PRECISIONS: dict[str, Provided] = _table(
    Provided("no", "full precision", CORE),
    Provided("fp16", "fp16 mixed precision", CORE),
    Provided("bf16", "bf16 mixed precision", CORE),
    Provided("fp8", "mixed_precision='fp8'", "accel-fp8"),
)
"""Values of ``mixed_precision``."""

DYNAMO_BACKENDS: tuple[str, ...] = (
    "NO",
    "EAGER",
    "AOT_EAGER",
    "INDUCTOR",
    "AOT_TS_NVFUSER",
    "NVPRIMS_NVFUSER",
    "CUDAGRAPHS",
    "OFI",
    "FX2TRT",
    "ONNXRT",
    "TENSORRT",
    "AOT_TORCHXLA_TRACE_ONCE",
    "TORCHXLA_TRACE_ONCE",
    "IPEX",
    "TVM",
    "HPU_BACKEND",
)
"""``torch.compile`` backends under Accelerate's names (``NO`` disables compilation)."""

DYNAMO_MODES: tuple[str, ...] = (
    "default",
    "reduce-overhead",
    "max-autotune",
    "max-autotune-no-cudagraphs",
)
"""``torch.compile`` modes."""

RDZV_BACKENDS: tuple[str, ...] = ("static", "c10d", "etcd", "etcd-v2")
"""Rendezvous backends of ``torch.distributed.run`` that ``accel launch`` passes on."""

TRACKERS: dict[str, Provided] = _table(
    *(
        Provided(name, f"the {name!r} tracker", f"accel-trackers[{name}]")
        for name in (
            "aim",
            "tensorboard",
            "wandb",
            "comet_ml",
            "mlflow",
            "clearml",
            "dvclive",
        )
    )
)
"""Tracker names accepted by ``log_with=`` (``"all"`` means every installed one)."""

QUANTIZERS: dict[str, Provided] = _table(
    Provided("bnb", "bitsandbytes quantization", "accel-bnb"),
)
"""Quantizer names of ``load_and_quantize_model``."""

CONFIG_SECTIONS: dict[str, Provided] = _table(
    Provided("fsdp_config", "FSDP", "accel-fsdp"),
    Provided("deepspeed_config", "DeepSpeed", "accel-deepspeed"),
    Provided("megatron_lm_config", "Megatron-LM", "accel-megatron"),
    Provided("fp8_config", "FP8", "accel-fp8"),
    Provided("parallelism_config", "N-D parallelism", "accel-fsdp"),
    Provided("mpirun_config", "MPI launching", "accel-cluster"),
    Provided("slurm_config", "SLURM launching", "accel-cluster"),
    Provided("ray_config", "Ray launching", "accel-ray"),
    Provided("ft_config", "fault-tolerant training", "accel-ft"),
)
"""Config-file sections owned by plugins."""

SECTION_DISTRIBUTED_TYPE: dict[str, str] = {
    "fsdp_config": "FSDP",
    "deepspeed_config": "DEEPSPEED",
    "megatron_lm_config": "MEGATRON_LM",
}
"""Sections that only matter with one distributed type (they may sit empty otherwise): the
strategies a plugin chooses with ``--use_<name>``, each owning one section."""

FSDP_SHARDING_STRATEGIES: dict[str, bool] = {
    "FULL_SHARD": True,
    "SHARD_GRAD_OP": False,
    "NO_SHARD": False,
    "HYBRID_SHARD": True,
    "HYBRID_SHARD_ZERO2": False,
}
"""FSDP's sharding strategies in torch's numbering (1-5), each with whether it frees the
parameters after forward: FSDP2's ``reshard_after_forward`` (accel-fsdp's config and
``accel to-fsdp2`` read it here)."""

STRATEGY_TYPES: tuple[str, ...] = tuple(SECTION_DISTRIBUTED_TYPE.values())
"""Distributed types that are a training strategy of their own (FSDP, DeepSpeed, Megatron-LM)."""

STRATEGY_FLAGS: dict[str, str] = {
    f"use_{section.removesuffix('_config')}": kind
    for section, kind in SECTION_DISTRIBUTED_TYPE.items()
}
"""The ``accel launch`` flag choosing each strategy (``use_fsdp``: ``FSDP``)."""

STRATEGY_BASES: tuple[str, ...] = ("NO", *DATA_PARALLEL_TYPES)
"""Distributed types a strategy runs on and replaces when chosen: one process, or plain data
parallelism on any device kind (``accel config`` asks the strategy questions on each)."""


def _exports(package: str, *names: str) -> tuple[Provided, ...]:
    return tuple(Provided(name, name, package) for name in names)


EXPORTS: dict[str, Provided] = _table(
    *_exports("accel-ddp", "DDPCommunicationHookType", "DistributedDataParallelKwargs", "LocalSGD"),
    *_exports(
        "accel-fsdp",
        "FullyShardedDataParallelPlugin",
        "merge_fsdp_weights",
        "save_fsdp_model",
        "load_fsdp_model",
        "save_fsdp_optimizer",
        "load_fsdp_optimizer",
        "get_module_class_from_name",
        "get_parameters_from_modules",
        "enable_fsdp_ram_efficient_loading",
        "disable_fsdp_ram_efficient_loading",
        "FSDP2_PYTORCH_VERSION",
        "FSDP2_STATE_DICT_TYPE",
        "FSDP_AUTO_WRAP_POLICY",
        "FSDP_BACKWARD_PREFETCH",
        "FSDP_MODEL_NAME",
        "FSDP_PYTORCH_VERSION",
        "FSDP_SHARDING_STRATEGY",
        "FSDP_STATE_DICT_TYPE",
    ),
    *_exports(
        "accel-deepspeed",
        "DeepSpeedPlugin",
        "DummyOptim",
        "DummyScheduler",
        "HfDeepSpeedConfig",
        "DeepSpeedEngineWrapper",
        "DeepSpeedOptimizerWrapper",
        "DeepSpeedSchedulerWrapper",
    ),
    *_exports(
        "accel-megatron",
        "MegatronLMPlugin",
        "MegatronLMDummyScheduler",
        "MegatronLMDummyDataLoader",
    ),
    *_exports(
        "accel-fp8",
        "FP8RecipeKwargs",
        "AORecipeKwargs",
        "TERecipeKwargs",
        "MSAMPRecipeKwargs",
        "convert_model_to_fp8_ao",
        "has_ao_layers",
        "has_transformer_engine_layers",
    ),
    *_exports("accel-bnb", "BnbQuantizationConfig"),
    *_exports("accel-profiler", "ProfileKwargs"),
)
"""Public names of ``accel`` / ``accel.utils`` owned by first-party plugins: the one list of them.

A first-party plugin's ``accel_exports`` hook returns its rows
(:func:`accel.lazy.catalog_exports`), each served by the plugin package's own lazy table;
when no installed plugin exports a name, this table names the package to install.
"""


def exports_of(package: str) -> tuple[str, ...]:
    """The names of :data:`EXPORTS` that distribution ``package`` provides."""
    return tuple(name for name, row in EXPORTS.items() if row.package == package)


def provider(name: str) -> Provided | None:
    """The row for ``name`` in any table (distributed type, precision, tracker, quantizer, section, export)."""
    name = DISTRIBUTED_TYPE_ALIASES.get(name, name)
    for table in (DISTRIBUTED_TYPES, PRECISIONS, QUANTIZERS, CONFIG_SECTIONS, EXPORTS, TRACKERS):
        if name in table:
            return table[name]
    return None


def needs_plugin(name: str) -> bool:
    """Whether ``name`` is provided by a package other than accel-core."""
    row = provider(name)
    return row is not None and row.package != CORE
