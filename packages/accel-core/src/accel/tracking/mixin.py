"""The Accelerator's tracker and profiler methods (a mixin of :class:`~accel.accelerator.Accelerator`)."""

from __future__ import annotations

from typing import Any

from .. import registry
from ..errors import MissingPluginError


class TrackingMixin:
    """``init_trackers``, ``log``, ``get_tracker``, ``end_training`` and ``profile``."""

    def init_trackers(
        self,
        project_name: str,
        config: dict[str, Any] | None = None,
        init_kwargs: dict[str, dict] | None = None,
    ) -> None:
        """Start every tracker of ``log_with`` for ``project_name`` and store ``config``."""
        from . import GeneralTracker, filter_trackers

        init_kwargs = init_kwargs or {}
        self.trackers = []
        for entry in filter_trackers(self.log_with, self.logging_dir):
            if isinstance(entry, GeneralTracker):
                tracker = entry
            else:
                cls = registry.get_tracker(entry)
                if cls.main_process_only and not self.is_main_process:
                    continue
                kwargs = dict(init_kwargs.get(entry, {}))
                if cls.requires_logging_directory or (
                    self.logging_dir is not None
                    and getattr(cls, "accepts_logging_directory", False)
                ):
                    kwargs.setdefault("logging_dir", self.logging_dir)
                tracker = cls(project_name, **kwargs)
            if tracker.main_process_only and not self.is_main_process:
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
        if self.is_main_process and name in [
            str(n) for n in (self.log_with if isinstance(self.log_with, list) else [self.log_with])
        ]:
            raise ValueError(f"{name} is not initialised: call init_trackers() first")
        from . import GeneralTracker

        blank = GeneralTracker(_blank=True)
        blank.name = name
        return blank

    def log(
        self,
        values: dict[str, Any],
        step: int | None = None,
        log_kwargs: dict[str, dict] | None = None,
    ) -> None:
        """Log ``values`` at ``step`` to every tracker."""
        log_kwargs = log_kwargs or {}
        for tracker in self.trackers:
            tracker.log(values, step=step, **log_kwargs.get(tracker.name, {}))

    def end_training(self) -> None:
        """Finish every tracker and wait for all processes."""
        for tracker in self.trackers:
            tracker.finish()
        self.trackers = []
        self.wait_for_everyone()

    def profile(self, profile_handler: Any = None) -> Any:
        """A context manager profiling the block (needs a profiler plugin such as accel-profiler)."""
        from ..plugins import hook

        handler = profile_handler or self.handlers.get("ProfileKwargs")
        context = hook().accel_profile(accelerator=self, profile_kwargs=handler)
        if context is None:
            raise MissingPluginError("accelerator.profile()", "accel-profiler")
        return context
