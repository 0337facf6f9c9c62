"""Experiment tracking: the :class:`GeneralTracker` ABC, ``on_main_process`` and tracker selection.

Concrete trackers (TensorBoard, W&B, ...) come from plugins such as accel-trackers,
registered through the ``accel_trackers`` hook; their classes are importable from
here (``from accel.tracking import WandBTracker``) once the plugin is installed.
"""

from __future__ import annotations

import functools
import sys
import warnings
from collections.abc import Callable, Iterator, MutableMapping
from typing import Any

from accel._lazy import plugin_attribute


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

    def __new__(cls, *args: Any, **kwargs: Any) -> GeneralTracker:
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

    def store_init_configuration(self, values: dict[str, Any]) -> None:
        """Record the hyperparameters ``values`` of this run."""

    def log(self, values: dict[str, Any], step: int | None = None, **kwargs: Any) -> None:
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

    def __call__(self, *args: Any, **kwargs: Any) -> _Null:
        return self

    def __getitem__(self, key: Any) -> _Null:
        return self

    def __setitem__(self, key: Any, value: Any) -> None:
        pass

    def __setattr__(self, name: str, value: Any) -> None:
        pass

    def __iter__(self):
        return iter(())

    def __len__(self) -> int:
        return 0

    def __bool__(self) -> bool:
        return False

    def __enter__(self) -> _Null:
        return self

    def __exit__(self, *exc: Any) -> None:
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
    def tracker(self) -> Any:
        """A no-op object standing for the run."""
        return _NULL

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _NULL

    def __repr__(self) -> str:
        return f"NoOpTracker(name={self.name!r})"


def on_main_process(function: Callable) -> Callable:
    """Decorator for tracker methods: run only on the main process when the tracker is main-process-only."""

    @functools.wraps(function)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        from accel.state import PartialState

        if getattr(self, "main_process_only", False) and not PartialState().is_main_process:
            return None
        return function(self, *args, **kwargs)

    return wrapper


def available_trackers(installed_only: bool = True) -> list[str]:
    """Names of the trackers the installed plugins provide.

    With ``installed_only`` (default), only those that can run here (``is_available()``:
    their tracking library is installed); that is what ``log_with="all"`` uses.
    """
    from accel.plugins import registry

    table = registry.trackers()
    return sorted(n for n, cls in table.items() if not installed_only or _available(cls))


def _available(cls: type) -> bool:
    try:
        return bool(cls.is_available())
    except Exception:
        return False


def _library_missing(name: str, cls: type) -> ImportError:
    from accel.errors import MissingPluginError

    package = getattr(cls, "package", None) or f"the library of the {name!r} tracker"
    return MissingPluginError(
        f"the {name!r} tracker",
        package,
        f" (its tracking library is not installed for {sys.executable})",
    )


class _TrackerClasses(MutableMapping):
    """``{log_with name: tracker class}``: the classes registered here over those of the plugins.

    Reading a name looks first at the classes given to :func:`register_tracker_class` (or
    assigned here), then at the trackers the installed plugins provide; writing and
    deleting touch only the registered classes. The plugins are loaded on first use.
    """

    def __init__(self) -> None:
        self._registered: dict[str, type] = {}

    @staticmethod
    def _plugins() -> dict[str, type]:
        from accel.plugins import registry

        return registry.trackers()

    def __getitem__(self, name: str) -> type:
        if name in self._registered:
            return self._registered[name]
        return self._plugins()[name]

    def __setitem__(self, name: str, cls: type) -> None:
        self._registered[name] = cls

    def __delitem__(self, name: str) -> None:
        del self._registered[name]

    def __iter__(self) -> Iterator[str]:
        yield from self._registered
        yield from (n for n in self._plugins() if n not in self._registered)

    def __len__(self) -> int:
        return len(set(self._registered) | set(self._plugins()))

    def __contains__(self, name: object) -> bool:
        return name in self._registered or name in self._plugins()

    def registered(self, name: str) -> type | None:
        """The class registered as ``name`` (not a plugin's), or None."""
        return self._registered.get(name)

    def __repr__(self) -> str:
        return f"LOGGER_TYPE_TO_CLASS({dict(self)!r})"


LOGGER_TYPE_TO_CLASS: MutableMapping[str, type] = _TrackerClasses()
"""``{log_with name: tracker class}`` as in Accelerate: registered classes first, then the plugins' trackers."""


def register_tracker_class(tracker_class: type[GeneralTracker]) -> None:
    """Make ``tracker_class`` usable by its ``name`` in ``Accelerator(log_with=...)``, as in Accelerate 1.15.

    Register it before creating the Accelerator that uses it. The class must subclass
    :class:`GeneralTracker` and define a non-empty ``name`` and a
    ``requires_logging_directory`` class attribute. ``init_trackers`` creates it as
    Accelerate does: ``tracker_class(project_name, **init_kwargs[name])``, with the
    logging directory as second positional argument when ``requires_logging_directory``.
    A name already known (registered, or a plugin's tracker) is replaced, with a warning.
    """
    if not (isinstance(tracker_class, type) and issubclass(tracker_class, GeneralTracker)):
        raise ValueError(
            f"`tracker_class` must be a subclass of `GeneralTracker`, got {tracker_class!r}"
        )
    name = getattr(tracker_class, "name", None)
    if not name:
        raise ValueError("the tracker class to register must define a non-empty `name` attribute")
    if not hasattr(tracker_class, "requires_logging_directory"):
        raise ValueError(
            "the tracker class to register must define a `requires_logging_directory` class attribute "
            "(True when it needs a logging directory, else False)"
        )
    if name in LOGGER_TYPE_TO_CLASS:
        warnings.warn(
            f"a tracker named {name!r} is already registered; {tracker_class!r} replaces it "
            "(this shadows a built-in tracker when the name is one)",
            UserWarning,
            stacklevel=2,
        )
    LOGGER_TYPE_TO_CLASS[name] = tracker_class


def _registered_tracker_class(name: str) -> type | None:
    """The class :func:`register_tracker_class` registered as ``name``, or None."""
    return LOGGER_TYPE_TO_CLASS.registered(name)  # type: ignore[attr-defined]


def filter_trackers(log_with: Any, logging_dir: str | None = None) -> list[Any]:
    """Resolve ``log_with`` (names, ``LoggerType``, ``"all"``, tracker instances) into tracker entries.

    Returns names and instances. ``"all"`` adds every tracker whose library is installed
    (skipping, with a warning, those that need a logging directory when there is none);
    as in Accelerate, classes from :func:`register_tracker_class` are used by name only.
    An unknown name, or a tracker whose library is missing, raises an ImportError naming
    the package to install.
    """
    from accel.plugins import registry

    if log_with is None:
        return []
    items = log_with if isinstance(log_with, (list, tuple)) else [log_with]
    result: list[Any] = []
    for item in items:
        if isinstance(item, GeneralTracker):
            result.append(item)
            continue
        custom = _registered_tracker_class(str(item))
        if custom is not None:
            if custom.requires_logging_directory and logging_dir is None:
                raise ValueError(
                    f"the {str(item)!r} tracker needs a logging directory: pass project_dir= (or ProjectConfiguration(logging_dir=...)) to the Accelerator"
                )
            if str(item) not in result:
                result.append(str(item))
            continue
        name = str(item).lower()
        if name == "all":
            for other in available_trackers():
                cls = registry.get_tracker(other)
                if other in result:
                    continue
                if cls.requires_logging_directory and logging_dir is None:
                    warnings.warn(
                        f"log_with='all' skips the {other!r} tracker: it needs a logging directory; "
                        "pass project_dir= (or ProjectConfiguration(logging_dir=...)) to the Accelerator",
                        UserWarning,
                        stacklevel=3,
                    )
                    continue
                result.append(other)
            continue
        cls = registry.get_tracker(name)
        if not _available(cls):
            raise _library_missing(name, cls)
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
