"""What the seven trackers share: lazy library import, lazy run creation, value conversion, local mode."""

from __future__ import annotations

import importlib
import importlib.util
import logging
import numbers
import os
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

from accel.errors import MissingPluginError
from accel.tracking import GeneralTracker, on_main_process

logger = logging.getLogger("accel.trackers")

DISTRIBUTION = "accel-trackers"


class TrackerLibraryMissingError(MissingPluginError):
    """The tracking library behind a tracker is not installed; the message names the extra to install."""


class LibraryTracker(GeneralTracker):
    """Base of the trackers that drive a third-party library, imported only when the run starts.

    ``__init__`` only stores its arguments (so building a tracker is cheap and creates
    nothing); :meth:`start` creates the run, on the main process only. ``log`` and
    ``store_init_configuration`` start the run if nobody did. After :meth:`finish`, further
    calls are ignored.
    """

    accepts_logging_directory = True
    library: ClassVar[str] = ""
    """Import name of the tracking library (``"wandb"``)."""
    extra: ClassVar[str] = ""
    """Extra of accel-trackers installing it (``"wandb"`` -> ``accel-trackers[wandb]``)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.extra:
            cls.package = f"{DISTRIBUTION}[{cls.extra}]"

    def __init__(self, run_name: str, logging_dir: str | os.PathLike | None = None, **kwargs: Any):
        super().__init__()
        self.run_name = run_name
        self.logging_dir = None if logging_dir is None else os.fspath(logging_dir)
        self.init_kwargs = kwargs
        self._run: Any = None
        self._finished = False

    # -- library ---------------------------------------------------------------
    @classmethod
    def is_available(cls) -> bool:
        """Whether the tracking library is installed (checked without importing it)."""
        try:
            return importlib.util.find_spec(cls.library) is not None
        except (ImportError, ValueError):
            return False

    @classmethod
    def import_library(cls) -> Any:
        """Import the tracking library, or raise :class:`TrackerLibraryMissingError` naming the extra."""
        try:
            return importlib.import_module(cls.library)
        except ImportError as exc:
            raise TrackerLibraryMissingError(
                f"the {cls.name!r} tracker",
                cls.package or DISTRIBUTION,
                f" (import {cls.library} failed: {exc})",
            ) from exc

    # -- lifecycle -------------------------------------------------------------
    @property
    def tracker(self) -> Any:
        """The library's run object (None before :meth:`start`)."""
        return self._run

    @on_main_process
    def start(self) -> None:
        """Create the run (once)."""
        if self._run is None and not self._finished:
            self._run = self._create_run()

    def _ensure_run(self) -> bool:
        if self._finished:
            return False
        if self._run is None:
            self._run = self._create_run()
        return True

    @on_main_process
    def store_init_configuration(self, values: dict[str, Any]) -> None:
        """Record the hyperparameters ``values`` of this run."""
        if self._ensure_run():
            self._store_config(to_python(dict(values)))

    @on_main_process
    def log(self, values: dict[str, Any], step: int | None = None, **kwargs: Any) -> None:
        """Record ``values`` (numbers, 0-d tensors, strings, ...) at ``step``."""
        if self._ensure_run():
            self._log(to_python(dict(values)), step, **kwargs)

    @on_main_process
    def finish(self) -> None:
        """Flush and close the run; later calls do nothing."""
        if self._run is not None and not self._finished:
            self._finish()
        self._finished = True

    # -- for subclasses ----------------------------------------------------------
    def _create_run(self) -> Any:
        raise NotImplementedError

    def _store_config(self, values: dict[str, Any]) -> None:
        raise NotImplementedError

    def _log(self, values: dict[str, Any], step: int | None, **kwargs: Any) -> None:
        raise NotImplementedError

    def _finish(self) -> None:
        raise NotImplementedError

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(run_name={self.run_name!r}, logging_dir={self.logging_dir!r})"
        )


# -- values ----------------------------------------------------------------------
def to_python(value: Any) -> Any:
    """``value`` with tensors / numpy scalars of one element turned into Python numbers, recursively.

    Larger tensors and arrays are left alone (image and histogram methods take them).
    """
    if isinstance(value, (str, bool, int, float)) or value is None:
        return value
    if isinstance(value, Mapping):
        return {str(k): to_python(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(to_python(v) for v in value)
    item = getattr(value, "item", None)
    numel = getattr(value, "numel", None)
    size = numel() if callable(numel) else getattr(value, "size", None)
    if callable(item) and size == 1:
        try:
            return item()
        except Exception:
            return value
    return value


def is_number(value: Any) -> bool:
    """A real number (bools excluded)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def plain_config(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` with anything that is not a number, string, bool, None, list or dict as its ``str``."""

    def convert(value: Any) -> Any:
        if value is None or isinstance(value, (str, bool, int, float)):
            return value
        if isinstance(value, Mapping):
            return {str(k): convert(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [convert(v) for v in value]
        return str(value)

    return {str(k): convert(v) for k, v in values.items()}


def flatten(values: Mapping[str, Any], sep: str = "/", prefix: str = "") -> dict[str, Any]:
    """Nested dicts as one level: ``{"a": {"b": 1}}`` -> ``{"a/b": 1}``."""
    flat: dict[str, Any] = {}
    for key, value in values.items():
        name = f"{prefix}{sep}{key}" if prefix else str(key)
        if isinstance(value, Mapping):
            flat.update(flatten(value, sep, name))
        else:
            flat[name] = value
    return flat


def image_list(images: Any) -> list[Any]:
    """One image or a list/batch of images as a list."""
    if isinstance(images, (list, tuple)):
        return list(images)
    ndim = getattr(images, "ndim", None)
    if ndim == 4:
        return list(images)
    return [images]


def to_numpy(image: Any) -> Any:
    """An image (tensor or array-like, HW or HWC) as a numpy ``uint8`` array.

    Floating-point images are taken to be in [0, 1] and scaled to 0-255.
    """
    import numpy as np

    detach = getattr(image, "detach", None)
    if callable(detach):
        image = detach().cpu().numpy()
    array = np.asarray(image)
    if array.dtype.kind == "f":
        array = (np.clip(array, 0.0, 1.0) * 255).round()
    if array.dtype != np.uint8:
        array = np.clip(array, 0, 255).astype(np.uint8)
    return array


# -- local mode --------------------------------------------------------------------
def env_set(*names: str) -> bool:
    """Whether any of the environment variables ``names`` is set (even empty)."""
    return any(name in os.environ for name in names)


def any_file(paths: Iterable[str | None]) -> bool:
    """Whether any of ``paths`` (``~`` expanded) is an existing file."""
    return any(path and os.path.isfile(os.path.expanduser(path)) for path in paths)


def set_default_env(values: Mapping[str, str]) -> dict[str, str]:
    """Set the environment variables of ``values`` the user has not set; return those set."""
    applied = {}
    for name, value in values.items():
        if name not in os.environ:
            os.environ[name] = value
            applied[name] = value
    return applied


def local_dir(logging_dir: str | None, *parts: str) -> str:
    """``logging_dir/parts`` (or ``./parts``), absolute, created."""
    path = os.path.abspath(os.path.join(logging_dir or os.getcwd(), *parts))
    os.makedirs(path, exist_ok=True)
    return path


def announce_local(tracker: str, where: str, how_to_go_online: str) -> None:
    """Say, once per run, that ``tracker`` runs in local mode and how to change it."""
    logger.warning(
        "accel-trackers: %s runs offline (nothing configured it to send data anywhere); "
        "data is saved under %s. %s",
        tracker,
        where,
        how_to_go_online,
    )
