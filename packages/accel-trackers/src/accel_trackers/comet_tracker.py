"""Comet ML (library: ``comet_ml``). Offline unless Comet is configured."""

from __future__ import annotations

import os
from typing import Any

from accel.tracking import on_main_process

from ._base import (
    LibraryTracker,
    announce_local,
    any_file,
    env_set,
    image_list,
    local_dir,
    plain_config,
    set_default_env,
    to_numpy,
)

LOCAL_ENV = {
    "COMET_ERROR_TRACKING_ENABLE": "false",  # no crash reports to Sentry
}
"""Environment defaults applied in local mode (only where the user set nothing)."""


def comet_configured(kwargs: dict[str, Any]) -> bool:
    """Whether the user chose online/offline or has Comet credentials.

    True when ``online`` or ``api_key`` is passed, ``COMET_START_ONLINE`` /
    ``COMET_API_KEY`` is set, or a Comet config file exists (``$COMET_CONFIG``,
    ``~/.comet.config``, ``./.comet.config``: what ``comet login`` writes).
    """
    if "online" in kwargs or "api_key" in kwargs:
        return True
    if env_set("COMET_START_ONLINE", "COMET_API_KEY"):
        return True
    return any_file([os.environ.get("COMET_CONFIG"), "~/.comet.config", ".comet.config"])


class CometMLTracker(LibraryTracker):
    """A Comet experiment: ``comet_ml.start(project_name=run_name, **kwargs)``.

    Offline default: unless Comet is configured (see :func:`comet_configured`), the
    experiment is an ``OfflineExperiment`` (``online=False``) archived as a ``.zip`` in
    ``<logging_dir or .>/.cometml-runs`` (created; ``comet upload <zip>`` sends it later),
    without environment/cloud probing (``log_env_details=False``) and with Comet's error
    reporting off (``COMET_ERROR_TRACKING_ENABLE=false``). Pass
    ``init_kwargs={"comet_ml": {"online": True}}`` or set ``COMET_API_KEY`` to log online.
    """

    name = "comet_ml"
    requires_logging_directory = False
    library = "comet_ml"
    extra = "comet-ml"

    def _create_run(self) -> Any:
        kwargs = dict(self.init_kwargs)
        local = not comet_configured(kwargs)
        if local:
            set_default_env(LOCAL_ENV)
        comet_ml = self.import_library()
        config = kwargs.pop("experiment_config", None)
        if local:
            kwargs["online"] = False
            if config is None:
                config = comet_ml.ExperimentConfig(
                    log_env_details=False,
                    offline_directory=local_dir(self.logging_dir, ".cometml-runs"),
                )
            offline_dir = os.path.abspath(
                getattr(config, "offline_directory", None) or ".cometml-runs"
            )
            os.makedirs(offline_dir, exist_ok=True)  # Comet fails at the end when it is missing
            config.offline_directory = offline_dir
            announce_local(
                "comet_ml", offline_dir, "Set COMET_API_KEY (or `comet login`) to log online."
            )
        if config is not None:
            kwargs["experiment_config"] = config
        return comet_ml.start(project_name=self.run_name, **kwargs)

    def _store_config(self, values: dict[str, Any]) -> None:
        self._run.log_parameters(plain_config(values))

    def _log(self, values: dict[str, Any], step: int | None, **kwargs: Any) -> None:
        for key, value in values.items():
            if isinstance(value, dict):
                self._run.log_metrics(value, prefix=key, step=step, **kwargs)
            elif isinstance(value, str):
                self._run.log_other(key, value)
            else:
                self._run.log_metric(key, value, step=step, **kwargs)

    @on_main_process
    def log_images(self, values: dict[str, Any], step: int | None = None, **kwargs: Any) -> None:
        """Log images: ``{name: image or list/batch of images}`` (HWC arrays or tensors)."""
        if not self._ensure_run():
            return
        for key, images in values.items():
            batch = image_list(images)
            for index, image in enumerate(batch):
                name = key if len(batch) == 1 else f"{key}_{index}"
                self._run.log_image(to_numpy(image), name=name, step=step, **kwargs)

    @on_main_process
    def log_table(
        self,
        table_name: str,
        columns: list[str] | None = None,
        data: list[list[Any]] | None = None,
        dataframe: Any = None,
        step: int | None = None,
        **kwargs: Any,
    ) -> None:
        """Log a table asset: ``columns`` + ``data`` rows as ``<table_name>.csv``, or a pandas ``dataframe`` as ``.json``."""
        if not self._ensure_run():
            return
        has_suffix = os.path.splitext(table_name)[1] != ""
        if dataframe is not None:
            name = table_name if has_suffix else f"{table_name}.json"
            self._run.log_table(name, tabular_data=dataframe, **kwargs)
        else:
            name = table_name if has_suffix else f"{table_name}.csv"
            self._run.log_table(name, tabular_data=data, headers=columns or False, **kwargs)

    def _finish(self) -> None:
        self._run.end()
