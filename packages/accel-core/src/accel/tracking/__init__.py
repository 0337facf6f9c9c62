"""Experiment tracking: tracker selection, and the ABC of :mod:`accel.tracking.base` re-exported.

Concrete trackers (TensorBoard, W&B, ...) come from plugins such as accel-trackers,
registered through the ``accel_trackers`` hook; their classes are importable from
here (``from accel.tracking import WandBTracker``) once the plugin is installed.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterator, MutableMapping

from accel.lazy import exports
from accel.tracking.base import GeneralTracker, NoOpTracker, on_main_process

__all__ = [
    "GeneralTracker",
    "NoOpTracker",
    "TRACKER_CLASSES",
    "available_trackers",
    "check_log_with",
    "filter_trackers",
    "on_main_process",
    "register_tracker_class",
]


def available_trackers(installed_only: bool = True) -> list[str]:
    """Names of the trackers the installed plugins provide.

    With ``installed_only`` (default), only those that can run here (``is_available()``:
    their tracking library is installed); that is what ``log_with="all"`` uses.
    """
    table = _TrackerClasses._plugins()
    return sorted(n for n, cls in table.items() if not installed_only or _available(cls))


def tracker_class(name: str) -> type[GeneralTracker]:
    """The plugin tracker class named ``name`` (:func:`accel.plugins.registry.get_tracker`),
    checked to be a :class:`GeneralTracker`: a plugin's other class is a TypeError naming it."""
    from accel.plugins import registry

    return _checked(name, registry.get_tracker(name))


def _checked(name: str, cls: type) -> type[GeneralTracker]:
    if not issubclass(cls, GeneralTracker):
        raise TypeError(f"the {name!r} tracker {cls.__qualname__} is not a GeneralTracker subclass")
    return cls


def _available(cls: type[GeneralTracker]) -> bool:
    try:
        return bool(cls.is_available())
    except Exception:
        return False


def _library_missing(name: str, cls: type[GeneralTracker]) -> ImportError:
    from accel.errors import MissingPluginError

    package = getattr(cls, "package", None) or f"the library of the {name!r} tracker"
    return MissingPluginError(
        f"the {name!r} tracker",
        package,
        f" (its tracking library is not installed for {sys.executable})",
    )


class _TrackerClasses(MutableMapping[str, type[GeneralTracker]]):
    """``{log_with name: tracker class}``: the classes registered here over those of the plugins.

    Reading a name looks first at the classes given to :func:`register_tracker_class` (or
    assigned here), then at the trackers the installed plugins provide; writing and
    deleting touch only the registered classes. The plugins are loaded on first use.
    """

    def __init__(self) -> None:
        self._registered: dict[str, type[GeneralTracker]] = {}

    @staticmethod
    def _plugins() -> dict[str, type[GeneralTracker]]:
        from accel.plugins import registry

        return {name: _checked(name, cls) for name, cls in registry.trackers().items()}

    def __getitem__(self, name: str) -> type[GeneralTracker]:
        if name in self._registered:
            return self._registered[name]
        return self._plugins()[name]

    def __setitem__(self, name: str, cls: type[GeneralTracker]) -> None:
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

    def registered(self, name: str) -> type[GeneralTracker] | None:
        """The class registered as ``name`` (not a plugin's), or None."""
        return self._registered.get(name)

    def __repr__(self) -> str:
        return f"LOGGER_TYPE_TO_CLASS({dict(self)!r})"


LOGGER_TYPE_TO_CLASS = _TrackerClasses()
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
    if not any(  # GeneralTracker's own default does not count: the class must say
        "requires_logging_directory" in vars(klass)
        for klass in tracker_class.__mro__
        if klass is not GeneralTracker
    ):
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


def _registered_tracker_class(name: str) -> type[GeneralTracker] | None:
    """The class :func:`register_tracker_class` registered as ``name``, or None."""
    return LOGGER_TYPE_TO_CLASS.registered(name)


def _needs_directory(name: str) -> ValueError:
    return ValueError(
        f"Logging with `{name}` requires a `logging_dir` to be passed in: pass project_dir= "
        "(or ProjectConfiguration(logging_dir=...)) to the Accelerator"
    )


def _check_entry(item: object) -> None:
    """ValueError unless ``item`` is a tracker name (``str``, ``LoggerType``) or a tracker instance."""
    if isinstance(item, (str, GeneralTracker)):
        return
    if isinstance(item, type) and issubclass(item, GeneralTracker):
        raise ValueError(
            f"log_with got the class {item.__name__}, not a tracker: pass an instance "
            f"({item.__name__}(...)), or register the class with register_tracker_class and "
            "pass its name"
        )
    raise ValueError(
        f"unsupported log_with entry {item!r}: give a tracker name, 'all', or an instance of "
        "a GeneralTracker subclass"
    )


def check_log_with(log_with: object, logging_dir: str | None = None) -> None:
    """What ``Accelerator(log_with=...)`` checks when it is created, as Accelerate does.

    Each entry must be a tracker name (``str`` / ``LoggerType``, ``"all"``) or a
    :class:`GeneralTracker` instance (ValueError otherwise), and a tracker whose class sets
    ``requires_logging_directory`` needs ``logging_dir`` (ValueError saying so). A name
    whose plugin or library is missing is left to ``init_trackers``, which names the package.
    """
    if log_with is None:
        return
    for item in log_with if isinstance(log_with, (list, tuple)) else [log_with]:
        _check_entry(item)
        if isinstance(item, GeneralTracker) or logging_dir is not None:
            continue
        cls = _registered_tracker_class(str(item))
        if cls is None:
            cls = _TrackerClasses._plugins().get(str(item).lower())
            if cls is not None and not _available(cls):
                continue
        if cls is not None and cls.requires_logging_directory:
            raise _needs_directory(str(item))


def filter_trackers(log_with: object, logging_dir: str | None = None) -> list[str | GeneralTracker]:
    """Resolve ``log_with`` (names, ``LoggerType``, ``"all"``, tracker instances) into tracker entries.

    Returns names and instances. ``"all"`` adds every tracker whose library is installed
    (skipping, with a warning, those that need a logging directory when there is none);
    as in Accelerate, classes from :func:`register_tracker_class` are used by name only.
    An unknown name, or a tracker whose library is missing, raises an ImportError naming
    the package to install.
    """
    if log_with is None:
        return []
    items = log_with if isinstance(log_with, (list, tuple)) else [log_with]
    result: list[str | GeneralTracker] = []
    for item in items:
        if isinstance(item, GeneralTracker):
            result.append(item)
            continue
        _check_entry(item)
        custom = _registered_tracker_class(str(item))
        if custom is not None:
            if custom.requires_logging_directory and logging_dir is None:
                raise _needs_directory(str(item))
            if str(item) not in result:
                result.append(str(item))
            continue
        name = str(item).lower()
        if name == "all":
            for other in available_trackers():
                cls = tracker_class(other)
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
        cls = tracker_class(name)
        if not _available(cls):
            raise _library_missing(name, cls)
        if cls.requires_logging_directory and logging_dir is None:
            raise _needs_directory(name)
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
"""Tracker classes importable from here (Accelerate's path), served by accel-trackers when it is
installed; without it, importing one raises an error naming the package."""

__getattr__, __dir__ = exports(__name__, TRACKER_CLASSES)
