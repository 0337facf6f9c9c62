"""accel-trackers: experiment trackers for ``Accelerator(log_with=...)``.

TensorBoard, Weights & Biases, Comet ML, Aim, MLflow, ClearML and DVCLive, each an
implementation of :class:`accel.tracking.GeneralTracker` whose library is an extra
(``pip install "accel-trackers[wandb]"``, ``[all]``) imported only when its run starts.
With nothing configured, trackers that can send data over the network run offline /
locally (see each class and the README). Importing this package imports no tracking library.
"""

from __future__ import annotations

from ._base import LibraryTracker, TrackerLibraryMissingError
from .aim_tracker import AimTracker
from .clearml_tracker import ClearMLTracker
from .comet_tracker import CometMLTracker
from .dvclive_tracker import DVCLiveTracker
from .mlflow_tracker import MLflowTracker
from .tensorboard_tracker import TensorBoardTracker
from .wandb_tracker import WandBTracker

TRACKERS: tuple[type[LibraryTracker], ...] = (
    TensorBoardTracker,
    WandBTracker,
    CometMLTracker,
    AimTracker,
    MLflowTracker,
    ClearMLTracker,
    DVCLiveTracker,
)
"""Every tracker this package registers, in the order ``accel env`` lists them."""

__all__ = [
    "TRACKERS",
    "AimTracker",
    "ClearMLTracker",
    "CometMLTracker",
    "DVCLiveTracker",
    "LibraryTracker",
    "MLflowTracker",
    "TensorBoardTracker",
    "TrackerLibraryMissingError",
    "WandBTracker",
]
