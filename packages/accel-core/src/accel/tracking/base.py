"""The tracker ABC: :class:`GeneralTracker`, the :class:`NoOpTracker` and ``on_main_process``."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any, Concatenate, ParamSpec, TypeVar

_Self = TypeVar("_Self")
_Params = ParamSpec("_Params")
_Result = TypeVar("_Result")


class GeneralTracker:
    """Base class of every tracker.

    A subclass sets ``name`` (the ``log_with=`` name), ``requires_logging_directory``,
    implements ``tracker`` (the underlying run object), ``store_init_configuration``,
    ``log`` and optionally ``log_images`` / ``finish``. With ``main_process_only``
    (default) the Accelerator creates it only on the main process.

    A tracker that drives an optional library overrides :meth:`is_available` and sets
    ``package`` (what to install, e.g. ``"accel-trackers[wandb]"``): ``log_with="all"``
    then skips it when the library is missing, and naming it raises an ImportError
    that says what to install.

    ``GeneralTracker(_blank=True)`` is a :class:`NoOpTracker`: what processes that do not
    track receive from ``Accelerator.get_tracker``.
    """

    name: str = ""
    requires_logging_directory: bool = False
    accepts_logging_directory: bool = False
    """Whether ``__init__`` takes an optional ``logging_dir`` (given the Accelerator's, when it has one)."""
    main_process_only: bool = True
    package: str | None = None

    def __new__(cls, *args: object, **kwargs: object) -> GeneralTracker:
        if cls is GeneralTracker and kwargs.get("_blank"):
            cls = NoOpTracker
        return super().__new__(cls)

    @classmethod
    def is_available(cls) -> bool:
        """Whether this tracker can run here (its library is importable); cheap, imports nothing heavy."""
        return True

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

    def store_init_configuration(self, values: dict[str, object]) -> None:
        """Record the hyperparameters ``values`` of this run."""

    def log(self, values: dict[str, object], step: int | None = None, **kwargs: object) -> None:
        """Record ``values`` at ``step``."""

    def finish(self) -> None:
        """Flush and close the run."""


class _Null:
    """Accepts every attribute access, call, item access and assignment; does nothing."""

    __slots__ = ()

    def __getattr__(self, name: str) -> _Null:
        if name.startswith("__"):
            raise AttributeError(name)
        return self

    def __call__(self, *args: object, **kwargs: object) -> _Null:
        return self

    def __getitem__(self, key: object) -> _Null:
        return self

    def __setitem__(self, key: object, value: object) -> None:
        pass

    def __setattr__(self, name: str, value: object) -> None:
        pass

    def __iter__(self) -> Iterator[object]:
        return iter(())

    def __len__(self) -> int:
        return 0

    def __bool__(self) -> bool:
        return False

    def __enter__(self) -> _Null:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def __repr__(self) -> str:
        return "<accel no-op tracker object>"


_NULL = _Null()


class NoOpTracker(GeneralTracker):
    """A tracker that accepts every call and does nothing.

    ``Accelerator.get_tracker`` returns one on processes that do not track (every
    process but the main one), so ``get_tracker("wandb").log_images(...)`` or
    ``get_tracker("wandb").tracker.log_artifact(...)`` never raises there.
    """

    main_process_only = False

    def __init__(self, name: str = "", _blank: bool = True):
        super().__init__(_blank=True)
        self.name = name

    @property
    def tracker(self) -> _Null:
        """A no-op object standing for the run."""
        return _NULL

    def __getattr__(self, name: str) -> _Null:
        if name.startswith("__"):
            raise AttributeError(name)
        return _NULL

    def __repr__(self) -> str:
        return f"NoOpTracker(name={self.name!r})"


def on_main_process(
    function: Callable[Concatenate[_Self, _Params], _Result],
) -> Callable[Concatenate[_Self, _Params], _Result | None]:
    """Decorator for tracker methods: run only on the main process when the tracker is main-process-only."""

    @functools.wraps(function)
    def wrapper(self: _Self, *args: _Params.args, **kwargs: _Params.kwargs) -> _Result | None:
        from accel.state import PartialState

        if getattr(self, "main_process_only", False) and not PartialState().is_main_process:
            return None
        return function(self, *args, **kwargs)

    return wrapper
