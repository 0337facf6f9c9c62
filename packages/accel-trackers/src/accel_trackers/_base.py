"""What the seven trackers share: lazy library import, lazy run creation, one prologue per call."""

from __future__ import annotations

import importlib
import importlib.util
import os
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from accel.errors import MissingPluginError
from accel.tracking import GeneralTracker, on_main_process

from ._values import Values, python_values

if TYPE_CHECKING:
    from pandas import DataFrame

DISTRIBUTION = "accel-trackers"


class TrackerLibraryMissingError(MissingPluginError):
    """The tracking library behind a tracker is not installed; the message names the extra to install."""


RunT = TypeVar("RunT")
"""The library's run object of a tracker (``wandb.Run``, ``SummaryWriter``, ...)."""

LibraryOptions = dict[str, Any]
"""Keyword arguments passed unchanged to a library call (``init_kwargs``, a ``log*`` call's ``**kwargs``),
which checks them."""


class LibraryTracker(GeneralTracker, Generic[RunT]):
    """Base of the trackers that drive a third-party library, imported only when the run starts.

    ``__init__`` only stores its arguments (so building a tracker is cheap and creates
    nothing); :meth:`start` creates the run, on the main process only. ``log``,
    ``log_images`` and ``store_init_configuration`` start the run if nobody did. After
    :meth:`finish`, further calls are ignored. A subclass implements ``_create_run``,
    ``_store_config``, ``_log``, ``_log_images`` and ``_finish``.
    """

    accepts_logging_directory = True
    library: ClassVar[str] = ""
    """Import name of the tracking library (``"wandb"``)."""
    extra: ClassVar[str] = ""
    """Extra of accel-trackers installing it (``"wandb"`` -> ``accel-trackers[wandb]``)."""

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if cls.extra:
            cls.package = f"{DISTRIBUTION}[{cls.extra}]"

    def __init__(
        self, run_name: str, logging_dir: str | os.PathLike | None = None, **kwargs: object
    ):
        super().__init__()
        self.run_name = run_name
        self.logging_dir = None if logging_dir is None else os.fspath(logging_dir)
        self.init_kwargs: LibraryOptions = kwargs
        """Keyword arguments of the library's run constructor (``wandb.init``, ``aim.Run``, ...)."""
        self._run: RunT | None = None
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
    def import_library(cls) -> ModuleType:
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
    def tracker(self) -> RunT | None:
        """The library's run object (None before :meth:`start`)."""
        return self._run

    @on_main_process
    def start(self) -> None:
        """Create the run (once)."""
        if self._run is None and not self._finished:
            self._run = self._create_run()

    def _active_run(self) -> RunT | None:
        """The run, created on first use; None once the tracker has finished."""
        if self._finished:
            return None
        if self._run is None:
            self._run = self._create_run()
        return self._run

    @on_main_process
    def store_init_configuration(self, values: Values) -> None:
        """Record the hyperparameters ``values`` of this run."""
        run = self._active_run()
        if run is not None:
            self._store_config(run, python_values(values))

    @on_main_process
    def log(self, values: Values, step: int | None = None, **kwargs: object) -> None:
        """Record ``values`` (numbers, 0-d tensors, strings, ...) at ``step``."""
        run = self._active_run()
        if run is not None:
            self._log(run, python_values(values), step, kwargs)

    @on_main_process
    def log_images(self, values: Values, step: int | None = None, **kwargs: object) -> None:
        """Log images: ``{name: image or list/batch of images}`` (HWC arrays or tensors).

        How each library stores them is said by the tracker's class.
        """
        run = self._active_run()
        if run is not None:
            self._log_images(run, values, step, kwargs)

    @on_main_process
    def finish(self) -> None:
        """Flush and close the run; later calls do nothing."""
        if self._run is not None and not self._finished:
            self._finish(self._run)
        self._finished = True

    # -- for subclasses ----------------------------------------------------------
    def _create_run(self) -> RunT:
        raise NotImplementedError

    def _store_config(self, run: RunT, values: dict[str, object]) -> None:
        raise NotImplementedError

    def _log(
        self, run: RunT, values: dict[str, object], step: int | None, options: LibraryOptions
    ) -> None:
        raise NotImplementedError

    def _log_images(
        self, run: RunT, values: Values, step: int | None, options: LibraryOptions
    ) -> None:
        raise NotImplementedError

    def _finish(self, run: RunT) -> None:
        raise NotImplementedError

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(run_name={self.run_name!r}, logging_dir={self.logging_dir!r})"
        )


@dataclass(frozen=True)
class Table:
    """A table to log: ``columns`` + ``data`` rows, or a pandas ``dataframe``."""

    name: str
    columns: list[str] | None
    data: list[list[object]] | None
    dataframe: DataFrame | None


class TableTracker(LibraryTracker[RunT]):
    """A :class:`LibraryTracker` whose library also stores tables (``log_table``)."""

    @on_main_process
    def log_table(
        self,
        table_name: str,
        columns: list[str] | None = None,
        data: list[list[object]] | None = None,
        dataframe: DataFrame | None = None,
        step: int | None = None,
        **kwargs: object,
    ) -> None:
        """Log a table from ``columns`` + ``data`` rows or a pandas ``dataframe``.

        How each library stores it is said by the tracker's class.
        """
        table = Table(table_name, columns, data, dataframe)
        self._check_table(table)
        run = self._active_run()
        if run is not None:
            self._log_table(run, table, step, kwargs)

    def _check_table(self, table: Table) -> None:
        """Refuse a table the library cannot store, before the run starts."""

    def _log_table(
        self, run: RunT, table: Table, step: int | None, options: LibraryOptions
    ) -> None:
        raise NotImplementedError
