"""The enums of accel, under Accelerate's names (values come from :mod:`accel.catalog` where it has them)."""

from __future__ import annotations

import builtins
import enum
from typing import TYPE_CHECKING

from accel import catalog


class _StrEnum(str, enum.Enum):
    def __str__(self) -> str:
        return self.value

    @classmethod
    def list(cls) -> builtins.list[str]:
        """Every value of this enum."""
        return [m.value for m in cls]


# The enums built from the catalog at run time are spelled out for type checkers, which cannot
# follow the functional Enum API; tests/test_types_catalog.py keeps the two in step.
if TYPE_CHECKING:

    class DistributedType(_StrEnum):
        """How training is distributed."""

        NO = "NO"
        MULTI_CPU = "MULTI_CPU"
        MULTI_GPU = "MULTI_GPU"
        MULTI_NPU = "MULTI_NPU"
        MULTI_MLU = "MULTI_MLU"
        MULTI_SDAA = "MULTI_SDAA"
        MULTI_MUSA = "MULTI_MUSA"
        MULTI_XPU = "MULTI_XPU"
        MULTI_HPU = "MULTI_HPU"
        MULTI_NEURON = "MULTI_NEURON"
        DEEPSPEED = "DEEPSPEED"
        FSDP = "FSDP"
        XLA = "XLA"
        MEGATRON_LM = "MEGATRON_LM"
        TPU = "XLA"

    class PrecisionType(_StrEnum):
        """Values of ``mixed_precision``."""

        NO = "no"
        FP16 = "fp16"
        BF16 = "bf16"
        FP8 = "fp8"

    class DynamoBackend(_StrEnum):
        """torch.compile backends."""

        NO = "NO"
        EAGER = "EAGER"
        AOT_EAGER = "AOT_EAGER"
        INDUCTOR = "INDUCTOR"
        AOT_TS_NVFUSER = "AOT_TS_NVFUSER"
        NVPRIMS_NVFUSER = "NVPRIMS_NVFUSER"
        CUDAGRAPHS = "CUDAGRAPHS"
        OFI = "OFI"
        FX2TRT = "FX2TRT"
        ONNXRT = "ONNXRT"
        TENSORRT = "TENSORRT"
        AOT_TORCHXLA_TRACE_ONCE = "AOT_TORCHXLA_TRACE_ONCE"
        TORCHXLA_TRACE_ONCE = "TORCHXLA_TRACE_ONCE"
        IPEX = "IPEX"
        TVM = "TVM"
        HPU_BACKEND = "HPU_BACKEND"

    class LoggerType(_StrEnum):
        """Tracker names of ``log_with=``."""

        ALL = "all"
        AIM = "aim"
        TENSORBOARD = "tensorboard"
        WANDB = "wandb"
        COMETML = "comet_ml"
        MLFLOW = "mlflow"
        CLEARML = "clearml"
        DVCLIVE = "dvclive"

else:
    DistributedType = _StrEnum(
        "DistributedType",
        {**{name: name for name in catalog.DISTRIBUTED_TYPES}, **catalog.DISTRIBUTED_TYPE_ALIASES},
        module=__name__,
    )
    DistributedType.__doc__ = """How training is distributed (members from :data:`accel.catalog.DISTRIBUTED_TYPES`).

    ``TPU`` is Accelerate's older name of ``XLA``. Plugins may serve further types by plain string.
    """

    PrecisionType = _StrEnum(
        "PrecisionType", {name.upper(): name for name in catalog.PRECISIONS}, module=__name__
    )
    PrecisionType.__doc__ = "Values of ``mixed_precision`` (:data:`accel.catalog.PRECISIONS`)."

    DynamoBackend = _StrEnum(
        "DynamoBackend", {name: name for name in catalog.DYNAMO_BACKENDS}, module=__name__
    )
    DynamoBackend.__doc__ = "torch.compile backends (:data:`accel.catalog.DYNAMO_BACKENDS`)."

    LoggerType = _StrEnum(
        "LoggerType",
        {"ALL": "all", **{name.upper().replace("_", ""): name for name in catalog.TRACKERS}},
        module=__name__,
    )
    LoggerType.__doc__ = """Tracker names of ``log_with=`` (:data:`accel.catalog.TRACKERS`).

    ``ALL`` means every installed tracker; members have Accelerate's names (``COMETML`` is
    ``"comet_ml"``).
    """


class ComputeEnvironment(_StrEnum):
    """Where the job runs (the config file's ``compute_environment``)."""

    LOCAL_MACHINE = "LOCAL_MACHINE"
    AMAZON_SAGEMAKER = "AMAZON_SAGEMAKER"


class RNGType(_StrEnum):
    """Random number generators :func:`synchronize_rng_states` can synchronise."""

    TORCH = "torch"
    CUDA = "cuda"
    XLA = "xla"
    XPU = "xpu"
    GENERATOR = "generator"


class CustomDtype(enum.Enum):
    """Element types torch has no dtype for, which quantizers give the device-map planner.

    ``infer_auto_device_map`` / ``compute_module_sizes`` count ``FP8`` as one byte per
    element, ``INT4`` as half a byte and ``INT2`` as a quarter (Accelerate's enum, same values).
    """

    FP8 = "fp8"
    INT4 = "int4"
    INT2 = "int2"
