"""accel: one PyTorch training script on a CPU, GPUs, many machines, FSDP, DeepSpeed, ...

Importing ``accel`` is cheap: every public name is imported on first use
(:func:`accel.lazy.exports`). Names owned by a plugin (``FullyShardedDataParallelPlugin``,
``DistributedDataParallelKwargs``, ...) come from that plugin when it is installed;
otherwise using them raises an ImportError naming the package to install.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from accel.lazy import exports, installed_version, plugin_export, plugin_export_names

if TYPE_CHECKING:  # what editors and type checkers see; at run time each name loads on first use
    from accel.accelerator import (
        Accelerator as Accelerator,
    )
    from accel.big_model.device_map import (
        infer_auto_device_map as infer_auto_device_map,
    )
    from accel.big_model.dispatch import (
        cpu_offload as cpu_offload,
    )
    from accel.big_model.dispatch import (
        cpu_offload_with_hook as cpu_offload_with_hook,
    )
    from accel.big_model.dispatch import (
        disk_offload as disk_offload,
    )
    from accel.big_model.dispatch import (
        dispatch_model as dispatch_model,
    )
    from accel.big_model.dispatch import (
        init_empty_weights as init_empty_weights,
    )
    from accel.big_model.dispatch import (
        init_on_device as init_on_device,
    )
    from accel.big_model.dispatch import (
        load_checkpoint_and_dispatch as load_checkpoint_and_dispatch,
    )
    from accel.big_model.dispatch import (
        load_checkpoint_in_model as load_checkpoint_in_model,
    )
    from accel.data.loader import (
        skip_first_batches as skip_first_batches,
    )
    from accel.faults.preemption import (
        PreemptionKwargs as PreemptionKwargs,
    )
    from accel.hookspecs import (
        hookimpl as hookimpl,
    )
    from accel.imports import (
        is_rich_available as is_rich_available,
    )
    from accel.kwargs import (
        AutocastKwargs as AutocastKwargs,
    )
    from accel.kwargs import (
        DataLoaderConfiguration as DataLoaderConfiguration,
    )
    from accel.kwargs import (
        GradientAccumulationPlugin as GradientAccumulationPlugin,
    )
    from accel.kwargs import (
        GradScalerKwargs as GradScalerKwargs,
    )
    from accel.kwargs import (
        InitProcessGroupKwargs as InitProcessGroupKwargs,
    )
    from accel.kwargs import (
        ProjectConfiguration as ProjectConfiguration,
    )
    from accel.kwargs import (
        TorchDynamoPlugin as TorchDynamoPlugin,
    )
    from accel.launchers.notebook import (
        debug_launcher as debug_launcher,
    )
    from accel.launchers.notebook import (
        notebook_launcher as notebook_launcher,
    )
    from accel.memory import (
        find_executable_batch_size as find_executable_batch_size,
    )
    from accel.parallelism_config import (
        ParallelismConfig as ParallelismConfig,
    )
    from accel.rng import (
        synchronize_rng_states as synchronize_rng_states,
    )
    from accel.state import (
        AcceleratorState as AcceleratorState,
    )
    from accel.state import (
        GradientState as GradientState,
    )
    from accel.state import (
        PartialState as PartialState,
    )
    from accel.throughput.monitor import (
        ThroughputKwargs as ThroughputKwargs,
    )
    from accel.types import (
        DistributedType as DistributedType,
    )

    __version__: str

_NAMES: dict[str, str] = {
    "Accelerator": "accel.accelerator",
    "PartialState": "accel.state",
    "AcceleratorState": "accel.state",
    "GradientState": "accel.state",
    "DistributedType": "accel.types",
    "AutocastKwargs": "accel.kwargs",
    "GradScalerKwargs": "accel.kwargs",
    "InitProcessGroupKwargs": "accel.kwargs",
    "DataLoaderConfiguration": "accel.kwargs",
    "ProjectConfiguration": "accel.kwargs",
    "PreemptionKwargs": "accel.faults.preemption",
    "ThroughputKwargs": "accel.throughput.monitor",
    "GradientAccumulationPlugin": "accel.kwargs",
    "TorchDynamoPlugin": "accel.kwargs",
    "find_executable_batch_size": "accel.memory",
    "skip_first_batches": "accel.data.loader",
    "init_empty_weights": "accel.big_model.dispatch",
    "init_on_device": "accel.big_model.dispatch",
    "cpu_offload": "accel.big_model.dispatch",
    "cpu_offload_with_hook": "accel.big_model.dispatch",
    "load_checkpoint_in_model": "accel.big_model.dispatch",
    "disk_offload": "accel.big_model.dispatch",
    "dispatch_model": "accel.big_model.dispatch",
    "load_checkpoint_and_dispatch": "accel.big_model.dispatch",
    "infer_auto_device_map": "accel.big_model.device_map",
    "notebook_launcher": "accel.launchers.notebook",
    "debug_launcher": "accel.launchers.notebook",
    "hookimpl": "accel.hookspecs",
    "synchronize_rng_states": "accel.rng",
    "is_rich_available": "accel.imports",
    "ParallelismConfig": "accel.parallelism_config",
}

__all__ = sorted(_NAMES) + ["__version__"]

__getattr__, __dir__ = exports(
    __name__,
    _NAMES,
    computed={"__version__": installed_version("accel-core")},
    fallback=plugin_export,
    fallback_names=plugin_export_names,
)
