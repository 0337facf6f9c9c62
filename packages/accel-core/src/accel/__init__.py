"""accel: one PyTorch training script on a CPU, GPUs, many machines, FSDP, DeepSpeed, ...

Importing ``accel`` is cheap: every public name is imported on first use
(module ``__getattr__``). Names owned by a plugin (``FullyShardedDataParallelPlugin``,
``DistributedDataParallelKwargs``, ...) come from that plugin when it is installed;
otherwise using them raises an ImportError naming the package to install.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

__version__ = "0.1.0"

_NAMES: dict[str, str] = {
    "Accelerator": "accel.accelerator",
    "PartialState": "accel.state",
    "AcceleratorState": "accel.state",
    "GradientState": "accel.state",
    "DistributedType": "accel.utils.dataclasses",
    "AutocastKwargs": "accel.utils.dataclasses",
    "GradScalerKwargs": "accel.utils.dataclasses",
    "InitProcessGroupKwargs": "accel.utils.dataclasses",
    "DataLoaderConfiguration": "accel.utils.dataclasses",
    "ProjectConfiguration": "accel.utils.dataclasses",
    "GradientAccumulationPlugin": "accel.utils.dataclasses",
    "TorchDynamoPlugin": "accel.utils.dataclasses",
    "find_executable_batch_size": "accel.utils.memory",
    "skip_first_batches": "accel.data_loader",
    "init_empty_weights": "accel.big_modeling",
    "init_on_device": "accel.big_modeling",
    "cpu_offload": "accel.big_modeling",
    "cpu_offload_with_hook": "accel.big_modeling",
    "load_checkpoint_in_model": "accel.big_modeling",
    "disk_offload": "accel.big_modeling",
    "dispatch_model": "accel.big_modeling",
    "load_checkpoint_and_dispatch": "accel.big_modeling",
    "infer_auto_device_map": "accel.utils.device_map",
    "notebook_launcher": "accel.launchers.notebook",
    "debug_launcher": "accel.launchers.notebook",
    "hookimpl": "accel.hookspecs",
}

__all__ = sorted(_NAMES) + ["__version__"]


def __getattr__(name: str) -> Any:
    module = _NAMES.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value
        return value
    if name.startswith("_") or importlib.util.find_spec(f"{__name__}.{name}") is not None:
        raise AttributeError(name)  # a submodule not imported yet: let the import system load it
    try:
        return importlib.import_module("accel._lazy").resolve(name)
    except AttributeError:
        raise AttributeError(f"module 'accel' has no attribute {name!r}") from None


def __dir__() -> list[str]:
    from ._lazy import PLUGIN_NAMES

    return sorted(set(globals()) | set(_NAMES) | set(PLUGIN_NAMES))
