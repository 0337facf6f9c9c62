"""Comet ML (library: ``comet_ml``). Offline unless Comet is configured."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ._base import LibraryOptions, Table, TableTracker
from ._local import announce_local, any_file, env_set, local_dir, set_default_env
from ._values import Values, image_list, plain_config, to_numpy

if TYPE_CHECKING:
    from comet_ml import CometExperiment

LOCAL_ENV = {
    "COMET_ERROR_TRACKING_ENABLE": "false",  # no crash reports to Sentry
}
"""Environment defaults applied in local mode (only where the user set nothing)."""


def comet_configured(kwargs: dict[str, object]) -> bool:
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


class CometMLTracker(TableTracker["CometExperiment"]):
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

    def _create_run(self) -> CometExperiment:
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

    def _store_config(self, run: CometExperiment, values: dict[str, object]) -> None:
        run.log_parameters(plain_config(values))

    def _log(
        self,
        run: CometExperiment,
        values: dict[str, object],
        step: int | None,
        options: LibraryOptions,
    ) -> None:
        for key, value in values.items():
            if isinstance(value, dict):
                run.log_metrics(value, prefix=key, step=step, **options)
            elif isinstance(value, str):
                run.log_other(key, value)
            else:
                run.log_metric(key, value, step=step, **options)

    def _log_images(
        self, run: CometExperiment, values: Values, step: int | None, options: LibraryOptions
    ) -> None:
        """One ``log_image`` per image, named ``<key>_<index>`` in a batch."""
        for key, images in values.items():
            batch = image_list(images)
            for index, image in enumerate(batch):
                name = key if len(batch) == 1 else f"{key}_{index}"
                run.log_image(to_numpy(image), name=name, step=step, **options)

    def _log_table(
        self, run: CometExperiment, table: Table, step: int | None, options: LibraryOptions
    ) -> None:
        """A table asset: ``columns`` + ``data`` rows as ``<name>.csv``, a ``dataframe`` as ``.json``."""
        has_suffix = os.path.splitext(table.name)[1] != ""
        if table.dataframe is not None:
            name = table.name if has_suffix else f"{table.name}.json"
            run.log_table(name, tabular_data=table.dataframe, **options)
        else:
            name = table.name if has_suffix else f"{table.name}.csv"
            headers = {"headers": table.columns} if table.columns else {}  # default: no header row
            run.log_table(name, tabular_data=table.data, **headers, **options)

    def _finish(self, run: CometExperiment) -> None:
        run.end()
