"""DVCLive (library: ``dvclive``). Always local: files in a directory."""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING

from ._base import LibraryOptions, LibraryTracker
from ._local import env_set, set_default_env
from ._values import Values, image_list, is_number, plain_config, to_numpy

if TYPE_CHECKING:
    from dvclive import Live

logger = logging.getLogger("accel.trackers")

_warned: set[tuple[str, str]] = set()


def _warn_dropped(key: str, value: object) -> None:
    """Warn once per key and type that ``value`` cannot be a DVCLive metric and is dropped."""
    if (key, type(value).__name__) in _warned:
        return
    _warned.add((key, type(value).__name__))
    logger.warning(
        f"DVCLive cannot log {value!r} of type {type(value).__name__} for key {key!r} as a metric; dropped"
    )


LOCAL_ENV = {"DVC_NO_ANALYTICS": "true"}
"""Environment defaults applied when DVC Studio is not configured (only where the user set nothing)."""


class DVCLiveTracker(LibraryTracker["Live"]):
    """A DVCLive ``Live`` logger writing ``metrics.json``, ``params.yaml`` and ``plots/``.

    Args:
        run_name: the project name of ``init_trackers`` (not used by DVCLive).
        logging_dir: default parent of the output directory: ``<logging_dir>/dvclive``
            (``./dvclive`` without one).
        live: an existing ``dvclive.Live`` to log to instead of creating one.
        **kwargs: passed to ``dvclive.Live`` (``dir``, ``save_dvc_exp``, ``report``, ...).

    ``log`` sets ``live.step`` to ``step`` (when given), logs each number or string
    with ``log_metric`` (as Accelerate does; other values are dropped with a warning)
    and calls ``next_step()``. Without DVC Studio configured
    (``DVC_STUDIO_TOKEN``), DVC's analytics are turned off (``DVC_NO_ANALYTICS=true``).
    """

    name = "dvclive"
    requires_logging_directory = False
    library = "dvclive"
    extra = "dvclive"

    def __init__(
        self,
        run_name: str | None = None,
        logging_dir: str | os.PathLike | None = None,
        live: Live | None = None,
        **kwargs: object,
    ):
        super().__init__(run_name or "dvclive", logging_dir, **kwargs)
        self._live = live

    def _create_run(self) -> Live:
        if not env_set("DVC_STUDIO_TOKEN"):
            set_default_env(LOCAL_ENV)
        if self._live is not None:
            return self._live
        dvclive = self.import_library()
        kwargs = dict(self.init_kwargs)
        if self.logging_dir is not None:
            kwargs.setdefault("dir", os.path.join(self.logging_dir, "dvclive"))
        return dvclive.Live(**kwargs)

    @property
    def live(self) -> Live | None:
        """The ``dvclive.Live`` object (same as :attr:`tracker`)."""
        return self._run

    def _store_config(self, run: Live, values: dict[str, object]) -> None:
        # ParamLike omits None, which dvclive writes as null like any YAML value
        run.log_params(plain_config(values))  # ty: ignore[invalid-argument-type]

    def _log(
        self, run: Live, values: dict[str, object], step: int | None, options: LibraryOptions
    ) -> None:
        if step is not None:
            run.step = step
        for key, value in values.items():
            if is_number(value) or isinstance(value, str):
                run.log_metric(key, value, **options)
            else:
                _warn_dropped(key, value)
        run.next_step()

    def _log_images(
        self, run: Live, values: Values, step: int | None, options: LibraryOptions
    ) -> None:
        """Image files; ``name`` gets ``.png`` if it has no suffix, ``_<index>`` in a batch."""
        if step is not None:
            run.step = step
        for key, images in values.items():
            batch = image_list(images)
            for index, image in enumerate(batch):
                stem, ext = os.path.splitext(key)
                name = (stem if len(batch) == 1 else f"{stem}_{index}") + (ext or ".png")
                run.log_image(name, to_numpy(image), **options)

    def _finish(self, run: Live) -> None:
        run.end()
