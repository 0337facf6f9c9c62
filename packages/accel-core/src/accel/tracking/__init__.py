"""Experiment tracking: the :class:`GeneralTracker` ABC, ``on_main_process`` and tracker selection.

Concrete trackers (TensorBoard, W&B, ...) come from plugins such as accel-trackers,
registered through the ``accel_trackers`` hook; their classes are importable from
here (``from accel.tracking import WandBTracker``) once the plugin is installed.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from .._lazy import plugin_attribute


class GeneralTracker:
    """Base class of every tracker.

    A subclass sets ``name`` (the ``log_with=`` name), ``requires_logging_directory``,
    implements ``tracker`` (the underlying run object), ``store_init_configuration``,
    ``log`` and optionally ``log_images`` / ``finish``. With ``main_process_only``
    (default) the Accelerator creates it only on the main process.
    """

    name: str = ""
    requires_logging_directory: bool = False
    main_process_only: bool = True

    def __init__(self, _blank: bool = False):
        if _blank:
            return
        missing = [a for a in ("name", "requires_logging_directory") if not hasattr(self, a)]
        if missing or not self.name:
            raise NotImplementedError(
                f"{type(self).__name__} must define the class attributes `name` and `requires_logging_directory`"
            )

    def start(self) -> None:
        """Create the run (called lazily, on the processes that track)."""

    @property
    def tracker(self) -> Any:
        """The underlying run object of the tracking library."""
        return None

    def store_init_configuration(self, values: dict[str, Any]) -> None:
        """Record the hyperparameters ``values`` of this run."""

    def log(self, values: dict[str, Any], step: int | None = None, **kwargs: Any) -> None:
        """Record ``values`` at ``step``."""

    def finish(self) -> None:
        """Flush and close the run."""


def on_main_process(function: Callable) -> Callable:
    """Decorator for tracker methods: run only on the main process when the tracker is main-process-only."""

    @functools.wraps(function)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        from ..state import PartialState

        if getattr(self, "main_process_only", False) and not PartialState().is_main_process:
            return None
        return function(self, *args, **kwargs)

    return wrapper


def available_trackers() -> list[str]:
    """Names of every tracker the installed plugins provide."""
    from .. import registry

    return sorted(registry.trackers())


def filter_trackers(log_with: Any, logging_dir: str | None = None) -> list[Any]:
    """Resolve ``log_with`` (names, ``LoggerType``, ``"all"``, tracker instances) into tracker entries.

    Returns names and instances; unknown names raise an error naming the package to install.
    """
    from .. import registry

    if log_with is None:
        return []
    items = log_with if isinstance(log_with, (list, tuple)) else [log_with]
    result: list[Any] = []
    for item in items:
        if isinstance(item, GeneralTracker):
            result.append(item)
            continue
        name = str(item).lower()
        if name == "all":
            result.extend(n for n in available_trackers() if n not in result)
            continue
        cls = registry.get_tracker(name)
        if cls.requires_logging_directory and logging_dir is None:
            raise ValueError(
                f"the {name!r} tracker needs a logging directory: pass project_dir= (or ProjectConfiguration(logging_dir=...)) to the Accelerator"
            )
        if name not in result:
            result.append(name)
    return result


TRACKER_CLASSES = {
    "TensorBoardTracker": "accel_trackers",
    "WandBTracker": "accel_trackers",
    "CometMLTracker": "accel_trackers",
    "AimTracker": "accel_trackers",
    "MLflowTracker": "accel_trackers",
    "ClearMLTracker": "accel_trackers",
    "DVCLiveTracker": "accel_trackers",
}


def __getattr__(name: str) -> Any:
    if name in TRACKER_CLASSES:
        return plugin_attribute(name, TRACKER_CLASSES[name], "accel-trackers")
    raise AttributeError(f"module 'accel.tracking' has no attribute {name!r}")
