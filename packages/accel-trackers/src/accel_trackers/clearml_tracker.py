"""ClearML (library: ``clearml``). Offline unless ClearML is configured."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ._base import LibraryOptions, Table, TableTracker
from ._local import announce_local, any_file, env_set
from ._values import Values, image_list, is_number, plain_config, to_numpy

if TYPE_CHECKING:
    from clearml import Task
    from pandas import DataFrame


def clearml_configured(kwargs: dict[str, object]) -> bool:
    """Whether the user chose ClearML's mode or has a ClearML server configured.

    True when ``CLEARML_OFFLINE_MODE``, ``CLEARML_API_HOST`` or ``CLEARML_API_ACCESS_KEY``
    is set, or a ClearML config file exists (``$CLEARML_CONFIG_FILE``, ``~/clearml.conf``:
    what ``clearml-init`` writes).
    """
    if env_set("CLEARML_OFFLINE_MODE", "CLEARML_API_HOST", "CLEARML_API_ACCESS_KEY"):
        return True
    return any_file([os.environ.get("CLEARML_CONFIG_FILE"), "~/clearml.conf"])


SERIES_PREFIXES = ("eval", "test", "train")
"""Key prefixes that choose the series of a reported value (as in Accelerate)."""


def split_key(key: str) -> tuple[str, str]:
    """ClearML's (title, series) for a logged key, as Accelerate reports it.

    A key starting with ``eval_``, ``test_`` or ``train_`` (or ``eval/``, ...) goes to that
    series, under the rest of the key: ``"eval_loss"`` -> ``("loss", "eval")``. Any other
    key is a graph of the ``train`` series: ``"loss"`` -> ``("loss", "train")``.
    """
    for prefix in SERIES_PREFIXES:
        for sep in ("_", "/"):
            if key.startswith(prefix + sep) and len(key) > len(prefix) + 1:
                return key[len(prefix) + 1 :], prefix
    return key, "train"


class ClearMLTracker(TableTracker["Task"]):
    """A ClearML task: ``Task.init(project_name=run_name, task_name=..., **kwargs)``.

    ``project_name`` and ``task_name`` default to ``$CLEARML_PROJECT`` / ``$CLEARML_TASK``,
    else to the project name of ``init_trackers``. A task that already runs
    (``Task.current_task()``, e.g. started by ``clearml-agent``) is used instead, and is
    not closed by :meth:`finish`. Numbers are reported as scalars, graph and series
    chosen by :func:`split_key` (``eval_loss`` -> graph ``loss``, series ``eval``); with
    ``step=None`` they are single values. The configuration is stored as the task's
    configuration (``Task.connect_configuration``, section ``General``).

    Offline default: unless ClearML is configured (see :func:`clearml_configured`), the task
    runs in ClearML's offline mode: the session is written under
    ``$CLEARML_CACHE_DIR/offline`` (default ``~/.clearml/cache/offline``) and zipped at the
    end (``clearml-task --import-offline-session <zip>`` uploads it), and ClearML's update
    check is skipped, and events are reported from a thread rather than a forked
    subprocess (forking a process where other trackers already run threads can deadlock
    ``close()``). Set ``CLEARML_OFFLINE_MODE=0`` (or configure a server) to log online.
    """

    name = "clearml"
    requires_logging_directory = False
    library = "clearml"
    extra = "clearml"

    def _create_run(self) -> Task:
        clearml = self.import_library()
        kwargs = dict(self.init_kwargs)
        kwargs.setdefault("project_name", os.environ.get("CLEARML_PROJECT", self.run_name))
        kwargs.setdefault("task_name", os.environ.get("CLEARML_TASK", self.run_name))
        existing = clearml.Task.current_task()
        if existing is not None:
            self._external = True
            return existing
        if not clearml_configured(kwargs):
            clearml.Task.set_offline(offline_mode=True)
            _skip_update_check()
            _report_from_a_thread(clearml.Task)
            from clearml.config import get_offline_dir

            announce_local(
                "clearml", str(get_offline_dir()), "Run `clearml-init` to log to a ClearML server."
            )
        return clearml.Task.init(**kwargs)

    _external = False

    def _store_config(self, run: Task, values: dict[str, object]) -> None:
        run.connect_configuration(plain_config(values), name="General")

    def _log(
        self, run: Task, values: dict[str, object], step: int | None, options: LibraryOptions
    ) -> None:
        logger = run.get_logger()
        for key, value in values.items():
            if is_number(value):
                if step is None:
                    logger.report_single_value(name=key, value=value, **options)
                else:
                    title, series = split_key(key)
                    logger.report_scalar(title, series, value, iteration=step, **options)
            elif isinstance(value, str):
                logger.report_text(f"{key}: {value}", print_console=False)

    def _log_images(
        self, run: Task, values: Values, step: int | None, options: LibraryOptions
    ) -> None:
        """Debug samples; graph and series chosen as for scalars (:func:`split_key`)."""
        logger = run.get_logger()
        for key, images in values.items():
            title, series = split_key(key)
            batch = image_list(images)
            for index, image in enumerate(batch):
                logger.report_image(
                    title,
                    series if len(batch) == 1 else f"{series}_{index}",
                    iteration=step or 0,
                    image=to_numpy(image),
                    **options,
                )

    def _check_table(self, table: Table) -> None:
        if table.dataframe is None and table.data is None:
            raise ValueError("ClearMLTracker.log_table needs `data` (or a `dataframe`)")

    def _log_table(
        self, run: Task, table: Table, step: int | None, options: LibraryOptions
    ) -> None:
        """A pandas ``dataframe``, or ``data`` rows (headed by ``columns`` if given).

        Without ``columns`` the first row of ``data`` is the header. Graph and series are
        chosen as for scalars (:func:`split_key`); ``kwargs`` go to ``Logger.report_table``.
        """
        title, series = split_key(table.name)
        if table.dataframe is not None:
            plot: DataFrame | list[list[object]] = table.dataframe
        else:
            rows = [list(row) for row in table.data or []]
            plot = [list(table.columns), *rows] if table.columns else rows
        run.get_logger().report_table(title, series, iteration=step, table_plot=plot, **options)

    def _finish(self, run: Task) -> None:
        if not self._external:
            run.close()


def _report_from_a_thread(task_class: type[Task]) -> None:
    """Offline sessions report from a thread instead of a forked subprocess.

    Forking a training process that already runs other libraries' threads (W&B, Comet,
    MLflow, ... or a first ClearML task) can leave the fork deadlocked, and ``Task.close()``
    then waits for it forever. Offline reporting only writes local files, so a thread is enough.
    """
    try:
        # ClearML declares it a lazily evaluated setting; a plain bool is what it reads
        task_class._report_subprocess_enabled = False  # ty: ignore[invalid-assignment]
    except Exception:  # a private detail of ClearML
        pass


def _skip_update_check() -> None:
    """Offline runs do not ask ClearML's server for a newer package."""
    try:
        from clearml.utilities.check_updates import CheckPackageUpdates

        CheckPackageUpdates._package_version_checked = True
    except Exception:  # a private detail of ClearML: without it, the check just times out
        pass
