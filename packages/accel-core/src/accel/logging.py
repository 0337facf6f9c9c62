"""``get_logger``: a logger that, in multi-process runs, logs on the main process only by default.

accel's loggers are named after accel's modules (``accel.env_helpers``, ...).
:func:`route_logger_names` sends their records to other names instead: the ``accelerate``
compatibility distribution routes them to Accelerate's (``accelerate.utils.environment``), so
``logging.getLogger("accelerate").setLevel(...)`` governs them as it governs Accelerate's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from accel.config.core_options import PROCESS_SECTION

_route: Callable[[str], str] | None = None
_routed: dict[str, logging.Logger] = {}


def route_logger_names(names: Callable[[str], str] | None) -> None:
    """Log the records of the loggers of :func:`get_logger` and :func:`get_plain_logger` under ``names(name)``.

    ``names`` maps a logger's name to the name its records go to (it returns the name itself
    for the loggers it leaves alone); it applies at once, also to loggers made before the
    call. ``None`` restores accel's own names.
    """
    global _route
    _route = names
    _routed.clear()


class RoutedLogger(logging.LoggerAdapter):
    """A logger adapter whose records go to the name :func:`route_logger_names` gives its logger.

    Logs on every process, as a plain ``logging.Logger`` does.
    """

    def __init__(self, logger: logging.Logger, extra: Mapping[str, object] | None = None) -> None:
        super().__init__(logger, extra or {})

    @property
    def logger(self) -> logging.Logger:
        """The logger records go to: the routed name's, or the adapter's own."""
        if _route is None:
            return self._own
        target = _routed.get(self._own.name)
        if target is None:
            target = _routed[self._own.name] = logging.getLogger(_route(self._own.name))
        return target

    @logger.setter
    def logger(self, value: logging.Logger) -> None:
        self._own = value


def get_plain_logger(name: str) -> RoutedLogger:
    """``logging.getLogger(name)`` for accel's modules, through :func:`route_logger_names`."""
    return RoutedLogger(logging.getLogger(name))


class MultiProcessAdapter(RoutedLogger):
    """Logger adapter taking ``main_process_only`` (default True) and ``in_order`` (rank by rank)."""

    @staticmethod
    def _should_log(main_process_only: bool) -> bool:
        from accel.state import PartialState

        state = PartialState._shared_state
        if not main_process_only or not state:
            return True
        return state.get("process_index", 0) == 0

    def log(self, level: int, msg: object, *args: object, **kwargs: object) -> None:
        """Log ``msg``; ``main_process_only=False`` logs on every process, ``in_order=True`` one rank at a time."""
        from accel.state import PartialState

        main_process_only = bool(kwargs.pop("main_process_only", True))
        in_order = bool(kwargs.pop("in_order", False))
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

    The level is ``log_level``, else ``ACCEL_LOG_LEVEL`` (or Accelerate's ``ACCELERATE_LOG_LEVEL``),
    else left as configured.
    """
    if log_level is None:
        log_level = PROCESS_SECTION["log_level"].from_env()
    logger = logging.getLogger(name)
    if log_level is not None:
        logger.setLevel(log_level.upper())
        logger.root.setLevel(log_level.upper())
    return MultiProcessAdapter(logger, {})
