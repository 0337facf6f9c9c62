"""Accelerate's ``accelerate.utils.dataclasses`` path: re-exports of :mod:`accel.types` and :mod:`accel.kwargs`."""

from accel.kwargs import (  # noqa: F401
    AutocastKwargs,
    DataLoaderConfiguration,
    GradientAccumulationPlugin,
    GradScalerKwargs,
    InitProcessGroupKwargs,
    KwargsHandler,
    ProjectConfiguration,
    TorchDynamoPlugin,
)
from accel.types import (  # noqa: F401
    ComputeEnvironment,
    DistributedType,
    DynamoBackend,
    LoggerType,
    PrecisionType,
    RNGType,
)
from accel.utils import __dir__, __getattr__  # noqa: E402, F401  (every other accel.utils name)
