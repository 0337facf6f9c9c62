"""accel-trackers: experiment trackers for ``Accelerator(log_with=...)``.

TensorBoard, Weights & Biases, Comet ML, Aim, MLflow, ClearML and DVCLive, each an
implementation of :class:`accel.tracking.GeneralTracker` whose library is an extra
(``pip install "accel-trackers[wandb]"``, ``[all]``) imported only when its run starts.
With nothing configured, trackers that can send data over the network run offline /
locally (see each class and the README). Importing this package imports no tracking library.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from accel.lazy import exports

if TYPE_CHECKING:  # what type checkers and editors follow; at run time names load on first use
    from accel_trackers._base import LibraryTracker as LibraryTracker
    from accel_trackers._base import TrackerLibraryMissingError as TrackerLibraryMissingError
    from accel_trackers.aim_tracker import AimTracker as AimTracker
    from accel_trackers.clearml_tracker import ClearMLTracker as ClearMLTracker
    from accel_trackers.comet_tracker import CometMLTracker as CometMLTracker
    from accel_trackers.dvclive_tracker import DVCLiveTracker as DVCLiveTracker
    from accel_trackers.mlflow_tracker import MLflowTracker as MLflowTracker
    from accel_trackers.tensorboard_tracker import TensorBoardTracker as TensorBoardTracker
    from accel_trackers.wandb_tracker import WandBTracker as WandBTracker

    TRACKERS: tuple[type[LibraryTracker], ...]

_NAMES = {
    "LibraryTracker": "accel_trackers._base",
    "TrackerLibraryMissingError": "accel_trackers._base",
    "AimTracker": "accel_trackers.aim_tracker",
    "ClearMLTracker": "accel_trackers.clearml_tracker",
    "CometMLTracker": "accel_trackers.comet_tracker",
    "DVCLiveTracker": "accel_trackers.dvclive_tracker",
    "MLflowTracker": "accel_trackers.mlflow_tracker",
    "TensorBoardTracker": "accel_trackers.tensorboard_tracker",
    "WandBTracker": "accel_trackers.wandb_tracker",
}
"""Public names and the module defining each, imported on first use."""

__all__ = sorted(["TRACKERS", *_NAMES])

_ORDER = (
    "TensorBoardTracker",
    "WandBTracker",
    "CometMLTracker",
    "AimTracker",
    "MLflowTracker",
    "ClearMLTracker",
    "DVCLiveTracker",
)


def _trackers() -> tuple[type, ...]:
    """Every tracker class, in ``accel env``'s order."""
    import importlib

    return tuple(getattr(importlib.import_module(_NAMES[name]), name) for name in _ORDER)


__getattr__, __dir__ = exports(__name__, _NAMES, computed={"TRACKERS": _trackers})
