"""The Accelerator's tracking component: the trackers of ``log_with`` for one run.

:class:`TrackerManager` starts the trackers ``log_with`` names (``init_trackers``),
fans ``log`` out to them and finishes them (``end_training``; they stay listed). The Accelerator's
methods of the same names delegate to it; it needs only the process state (which
process logs) and the project configuration (where trackers write).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from typing import TypeAlias

    from accel.kwargs import ProjectConfiguration
    from accel.state import PartialState
    from accel.tracking.base import GeneralTracker
    from accel.types import LoggerType

    LogWith: TypeAlias = (
        "str | LoggerType | GeneralTracker | list[str | LoggerType | GeneralTracker] | None"
    )
    """What ``Accelerator(log_with=...)`` takes: tracker names, ``"all"``, tracker instances."""


class TrackerManager:
    """The started trackers of one Accelerator and the ``log_with`` they come from."""

    def __init__(
        self, log_with: LogWith, state: PartialState, project_configuration: ProjectConfiguration
    ):
        from accel.tracking import check_log_with

        check_log_with(log_with, project_configuration.logging_dir)
        self.log_with = log_with
        """What ``Accelerator(log_with=...)`` was given: names, ``LoggerType``, ``"all"``, trackers."""
        self.state = state
        self.project_configuration = project_configuration
        self.trackers: list[GeneralTracker] = []
        """The started trackers (only those that run on this process)."""
        self.value_sources: list[Callable[[], Mapping[str, object]]] = []
        """Functions whose values are added to every :meth:`log` call (the values passed to
        ``log`` win on a shared name); the Accelerator adds its backend's
        :meth:`~accel.backends.Backend.tracker_values`."""

    @property
    def logging_dir(self) -> str | None:
        """Where trackers write (the project configuration's ``logging_dir``)."""
        return self.project_configuration.logging_dir

    def init_trackers(
        self,
        project_name: str,
        config: dict[str, object] | None = None,
        init_kwargs: dict[str, dict] | None = None,
    ) -> None:
        """Start every tracker of ``log_with`` for ``project_name`` and store ``config``."""
        from accel.tracking import (
            GeneralTracker,
            _registered_tracker_class,
            filter_trackers,
            tracker_class,
        )

        init_kwargs = init_kwargs or {}
        main = self.state.is_main_process
        logging_dir = self.logging_dir
        self.trackers = []
        for entry in filter_trackers(self.log_with, logging_dir):
            if isinstance(entry, GeneralTracker):
                tracker = entry
            elif (custom := _registered_tracker_class(entry)) is not None:
                if custom.main_process_only and not main:
                    continue
                # Accelerate's convention: project name, then the logging directory, positionally
                args = (
                    (project_name, logging_dir)
                    if custom.requires_logging_directory
                    else (project_name,)
                )
                tracker = _construct(custom, *args, **init_kwargs.get(entry, {}))
            else:
                cls = tracker_class(entry)
                if cls.main_process_only and not main:
                    continue
                kwargs = dict(init_kwargs.get(entry, {}))
                if cls.requires_logging_directory or (
                    logging_dir is not None and getattr(cls, "accepts_logging_directory", False)
                ):
                    kwargs.setdefault("logging_dir", logging_dir)
                tracker = _construct(cls, project_name, **kwargs)
            if tracker.main_process_only and not main:
                continue
            tracker.start()
            self.trackers.append(tracker)
        if config is not None:
            for tracker in self.trackers:
                tracker.store_init_configuration(config)

    def get_tracker(self, name: str, unwrap: bool = False) -> Any:
        """The tracker called ``name`` (its run object with ``unwrap``); a no-op tracker elsewhere."""
        for tracker in self.trackers:
            if tracker.name == name:
                return tracker.tracker if unwrap else tracker
        names = self.log_with if isinstance(self.log_with, list) else [self.log_with]
        if self.state.is_main_process and name in [str(n) for n in names]:
            raise ValueError(f"{name} is not initialised: call init_trackers() first")
        from accel.tracking import GeneralTracker

        blank = GeneralTracker(_blank=True)
        blank.name = name
        return blank

    def log(
        self,
        values: dict[str, object],
        step: int | None = None,
        log_kwargs: dict[str, dict] | None = None,
    ) -> None:
        """Log ``values`` at ``step`` to every tracker."""
        log_kwargs = log_kwargs or {}
        for source in self.value_sources:
            extra = source()
            if extra:
                values = {**extra, **values}
        for tracker in self.trackers:
            tracker.log(values, step=step, **log_kwargs.get(tracker.name, {}))

    def finish(self) -> None:
        """Finish every tracker (the caller then waits for all processes).

        The trackers stay in :attr:`trackers`, as in Accelerate: scripts read them (their
        run ids, output folders) after ``end_training()``.
        """
        for tracker in self.trackers:
            tracker.finish()


def _construct(
    factory: Callable[..., GeneralTracker], *args: object, **kwargs: object
) -> GeneralTracker:
    """A tracker from its class: each subclass has a constructor of its own (Accelerate's
    convention: the project name, then its options), not :class:`GeneralTracker`'s."""
    return factory(*args, **kwargs)
