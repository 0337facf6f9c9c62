"""``get_logger``: a logger that, in multi-process runs, logs on the main process only by default."""

from __future__ import annotations

import logging
import os
from typing import Any

from accel import environment


class MultiProcessAdapter(logging.LoggerAdapter):
    """Logger adapter taking ``main_process_only`` (default True) and ``in_order`` (rank by rank)."""

    @staticmethod
    def _should_log(main_process_only: bool) -> bool:
        from accel.state import PartialState

        state = PartialState._shared_state
        if not main_process_only or not state:
            return True
        return state.get("process_index", 0) == 0

    def log(self, level: int, msg: Any, *args: Any, **kwargs: Any) -> None:
        """Log ``msg``; ``main_process_only=False`` logs on every process, ``in_order=True`` one rank at a time."""
        from accel.state import PartialState

        main_process_only = kwargs.pop("main_process_only", True)
        in_order = kwargs.pop("in_order", False)
        kwargs.setdefault("stacklevel", 2)
        if not self.isEnabledFor(level):
            return
        if not PartialState._shared_state or (main_process_only and not in_order):
            if self._should_log(main_process_only):
                msg, options = self.process(msg, kwargs)
                self.logger.log(level, msg, *args, **options)
            return
        state = PartialState()
        if in_order:
            for rank in range(state.num_processes):
                if rank == state.process_index:
                    msg, options = self.process(msg, kwargs)
                    self.logger.log(level, msg, *args, **options)
                state.wait_for_everyone()
        else:
            msg, options = self.process(msg, kwargs)
            self.logger.log(level, msg, *args, **options)

    def warning_once(self, *args: Any, **kwargs: Any) -> None:
        """Like ``warning``, once per distinct message."""
        key = str(args)
        if key not in _WARNED:
            _WARNED.add(key)
            self.warning(*args, **kwargs)


_WARNED: set[str] = set()


def get_logger(name: str, log_level: str | None = None) -> MultiProcessAdapter:
    """A logger for ``name`` whose calls accept ``main_process_only`` and ``in_order``.

    The level is ``log_level``, else ``ACCEL_LOG_LEVEL``, else left as configured.
    """
    if log_level is None:
        log_level = os.environ.get(environment.LOG_LEVEL)
    logger = logging.getLogger(name)
    if log_level is not None:
        logger.setLevel(log_level.upper())
        logger.root.setLevel(log_level.upper())
    return MultiProcessAdapter(logger, {})
