"""MLflow (library: ``mlflow``). A local SQLite store unless a tracking URI is configured."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ._base import LibraryOptions, Table, TableTracker
from ._local import announce_local, env_set, local_dir, set_default_env
from ._values import Values, flatten, image_list, is_number, plain_config, to_numpy

if TYPE_CHECKING:
    from mlflow import ActiveRun

LOCAL_ENV = {"MLFLOW_DISABLE_TELEMETRY": "true"}
"""Environment defaults applied in local mode (only where the user set nothing)."""

MAX_PARAM_LENGTH = 6000
"""MLflow rejects parameter values longer than this; longer ones are truncated."""
PARAMS_PER_BATCH = 100


_LOCAL_URIS: set[str] = set()
"""Local-mode URIs this process set (``mlflow.set_tracking_uri`` also exports ``MLFLOW_TRACKING_URI``)."""


def mlflow_configured(tracking_uri: str | None) -> bool:
    """Whether the user chose where MLflow writes (``tracking_uri=`` or ``MLFLOW_TRACKING_URI``)."""
    if tracking_uri is not None:
        return True
    return env_set("MLFLOW_TRACKING_URI") and os.environ["MLFLOW_TRACKING_URI"] not in _LOCAL_URIS


class MLflowTracker(TableTracker["ActiveRun"]):
    """An MLflow run in experiment ``experiment_name`` (the project name of ``init_trackers``).

    Args:
        experiment_name: experiment to log to (created if missing); ``MLFLOW_EXPERIMENT_NAME`` wins.
        logging_dir: directory for the local store and artifacts (default: the current directory).
        run_id: resume this run (``MLFLOW_RUN_ID`` wins).
        tags: run (and new experiment) tags, a dict (``MLFLOW_TAGS`` as JSON wins).
        nested_run: start the run nested in the active one (``MLFLOW_NESTED_RUN``).
        run_name: name of the run.
        description: description of the run.
        tracking_uri: where MLflow writes; ``MLFLOW_TRACKING_URI`` if not given.

    Local default: with no tracking URI configured, runs go to the SQLite database
    ``<logging_dir or .>/mlflow.db`` and new experiments keep artifacts in
    ``<logging_dir or .>/mlartifacts``; MLflow's usage telemetry is turned off
    (``MLFLOW_DISABLE_TELEMETRY=true``). ``mlflow ui --backend-store-uri sqlite:///.../mlflow.db``
    shows them. Set ``MLFLOW_TRACKING_URI`` (or pass ``tracking_uri``) to use a server.
    """

    name = "mlflow"
    requires_logging_directory = False
    library = "mlflow"
    extra = "mlflow"

    def __init__(
        self,
        experiment_name: str | None = None,
        logging_dir: str | os.PathLike | None = None,
        run_id: str | None = None,
        tags: dict[str, str] | str | None = None,
        nested_run: bool | str = False,
        run_name: str | None = None,
        description: str | None = None,
        tracking_uri: str | None = None,
    ):
        super().__init__(experiment_name or "Default", logging_dir)
        self.experiment_name = os.environ.get("MLFLOW_EXPERIMENT_NAME", experiment_name)
        self.run_id = os.environ.get("MLFLOW_RUN_ID", run_id)
        tags = os.environ.get("MLFLOW_TAGS", tags)
        if isinstance(tags, str):
            import json

            tags = json.loads(tags)
        self.tags = tags
        nested = os.environ.get("MLFLOW_NESTED_RUN", nested_run)
        if not isinstance(nested, bool):  # yes/no, on/off, true/false, 1/0, as Accelerate reads it
            from accel.env_helpers import str_to_bool

            nested = str_to_bool(str(nested), to_bool=True)
        self.nested_run = nested
        self.mlflow_run_name = run_name
        self.description = description
        self.tracking_uri = tracking_uri

    def _create_run(self) -> ActiveRun:
        local = not mlflow_configured(self.tracking_uri)
        artifact_location = None
        if local:
            set_default_env(LOCAL_ENV)
            root = local_dir(self.logging_dir)
            self.tracking_uri = "sqlite:///" + os.path.join(root, "mlflow.db")
            _LOCAL_URIS.add(self.tracking_uri)
            artifact_location = local_dir(root, "mlartifacts")
            announce_local(
                "mlflow", self.tracking_uri, "Set MLFLOW_TRACKING_URI to log to an MLflow server."
            )
        mlflow = self.import_library()
        if self.tracking_uri is not None:
            mlflow.set_tracking_uri(self.tracking_uri)
        experiment_id = None
        if self.experiment_name:
            experiment = mlflow.get_experiment_by_name(self.experiment_name)
            if experiment is None:
                experiment_id = mlflow.create_experiment(
                    self.experiment_name,
                    artifact_location=artifact_location
                    and f"{artifact_location}/{self.experiment_name}",
                    tags=self.tags,
                )
            else:
                experiment_id = experiment.experiment_id
        return mlflow.start_run(
            run_id=self.run_id,
            experiment_id=experiment_id,
            run_name=self.mlflow_run_name,
            nested=self.nested_run,
            tags=self.tags,
            description=self.description,
        )

    def _store_config(self, run: ActiveRun, values: dict[str, object]) -> None:
        mlflow = self.import_library()
        params = {}
        for key, value in flatten(plain_config(values)).items():
            text = str(value)
            if len(text) > MAX_PARAM_LENGTH:
                text = text[: MAX_PARAM_LENGTH - 3] + "..."
            params[key] = text
        items = list(params.items())
        for start in range(0, len(items), PARAMS_PER_BATCH):
            mlflow.log_params(dict(items[start : start + PARAMS_PER_BATCH]))

    def _log(
        self, run: ActiveRun, values: dict[str, object], step: int | None, options: LibraryOptions
    ) -> None:
        mlflow = self.import_library()
        metrics = {k: v for k, v in flatten(values).items() if is_number(v)}
        if metrics:
            mlflow.log_metrics(metrics, step=step, **options)
        for key, value in values.items():
            if isinstance(value, str):
                mlflow.set_tag(key, value)

    def _log_images(
        self, run: ActiveRun, values: Values, step: int | None, options: LibraryOptions
    ) -> None:
        """Images as artifacts (``mlflow.log_image``), named ``<key>_<index>`` in a batch."""
        mlflow = self.import_library()
        for key, images in values.items():
            batch = image_list(images)
            for index, image in enumerate(batch):
                name = key if len(batch) == 1 else f"{key}_{index}"
                mlflow.log_image(to_numpy(image), key=name, step=step or 0, **options)

    def _log_table(
        self, run: ActiveRun, table: Table, step: int | None, options: LibraryOptions
    ) -> None:
        """A table artifact ``<name>.json`` (``mlflow.log_table``)."""
        mlflow = self.import_library()
        dataframe = table.dataframe
        if dataframe is None:
            rows = table.data or []
            dataframe = {c: [row[i] for row in rows] for i, c in enumerate(table.columns or [])}
        name = table.name if table.name.endswith(".json") else f"{table.name}.json"
        mlflow.log_table(data=dataframe, artifact_file=name, **options)

    def _finish(self, run: ActiveRun) -> None:
        mlflow = self.import_library()
        active = mlflow.active_run()
        if active is not None and active.info.run_id == run.info.run_id:
            mlflow.end_run()
        else:
            mlflow.MlflowClient().set_terminated(run.info.run_id)
