"""accel-trackers: experiment trackers for ``Accelerator(log_with=...)``.

TensorBoard, Weights & Biases, Comet ML, Aim, MLflow, ClearML and DVCLive, each an
implementation of :class:`accel.tracking.GeneralTracker` whose library is an extra
(``pip install "accel-trackers[wandb]"``, ``[all]``) imported only when its run starts.
With nothing configured, trackers that can send data over the network run offline /
locally (see each class and the README). Importing this package imports no tracking library.
"""

from __future__ import annotations

from typing import Any

from accel.forwarding import module_attributes

_NAMES = {
    "LibraryTracker": "_base",
    "TrackerLibraryMissingError": "_base",
    "AimTracker": "aim_tracker",
    "ClearMLTracker": "clearml_tracker",
    "CometMLTracker": "comet_tracker",
    "DVCLiveTracker": "dvclive_tracker",
    "MLflowTracker": "mlflow_tracker",
    "TensorBoardTracker": "tensorboard_tracker",
    "WandBTracker": "wandb_tracker",
}
"""Public names and their module, loaded on first use (``accel launch`` imports the plugin
module without them)."""

_ORDER = (
    "TensorBoardTracker",
    "WandBTracker",
    "CometMLTracker",
    "AimTracker",
    "MLflowTracker",
    "ClearMLTracker",
    "DVCLiveTracker",
)

__all__ = sorted(["TRACKERS", *_NAMES])


_public = module_attributes(__name__, _NAMES)


def __getattr__(name: str) -> Any:
    if name != "TRACKERS":
        return _public(name)
    value = tuple(_public(tracker) for tracker in _ORDER)  # in `accel env`'s order
    globals()[name] = value
    return value
