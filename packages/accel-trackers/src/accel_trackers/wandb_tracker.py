"""Weights & Biases (library: ``wandb``). Offline unless W&B is configured."""

from __future__ import annotations

import netrc
import os
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from ._base import LibraryOptions, Table, TableTracker
from ._local import announce_local, env_set
from ._values import Values, image_list, plain_config, to_numpy

if TYPE_CHECKING:
    from wandb import Run


def wandb_configured(kwargs: dict[str, object]) -> bool:
    """Whether the user chose a W&B mode or has W&B credentials.

    True when ``mode`` is passed, ``WANDB_MODE`` / ``WANDB_API_KEY`` is set, or ``~/.netrc``
    (``$NETRC``) holds a login for the W&B host (what ``wandb login`` writes).
    """
    if "mode" in kwargs or "settings" in kwargs or env_set("WANDB_MODE", "WANDB_API_KEY"):
        return True
    host = urlparse(os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai")).hostname
    try:
        return netrc.netrc(os.environ.get("NETRC")).authenticators(host or "") is not None
    except (OSError, netrc.NetrcParseError):
        return False


class WandBTracker(TableTracker["Run"]):
    """A W&B run: ``wandb.init(project=run_name, **kwargs)``.

    Offline default: unless W&B is configured (see :func:`wandb_configured`), the run is
    created with ``mode="offline"`` and saved under ``dir`` (default: ``logging_dir`` when
    given, else the current directory) in ``wandb/offline-run-*``; ``wandb sync`` uploads
    it later. Set ``WANDB_MODE=online`` or pass ``init_kwargs={"wandb": {"mode": "online"}}``
    to send it to W&B.
    """

    name = "wandb"
    requires_logging_directory = False
    library = "wandb"
    extra = "wandb"

    def _create_run(self) -> Run:
        wandb = self.import_library()
        kwargs = dict(self.init_kwargs)
        # explicit, as W&B otherwise keeps the directory of the first run of the process
        directory = kwargs.setdefault("dir", os.path.abspath(self.logging_dir or os.getcwd()))
        if not wandb_configured(kwargs):
            kwargs["mode"] = "offline"
            where = os.path.join(str(directory), "wandb")
            announce_local(
                "wandb", where, "Set WANDB_MODE=online (or `wandb login`) to sync to W&B."
            )
        os.makedirs(str(directory), exist_ok=True)
        return wandb.init(project=self.run_name, **kwargs)

    def _store_config(self, run: Run, values: dict[str, object]) -> None:
        run.config.update(plain_config(values), allow_val_change=True)

    def _log(
        self, run: Run, values: dict[str, object], step: int | None, options: LibraryOptions
    ) -> None:
        run.log(values, step=step, **options)

    def _log_images(
        self, run: Run, values: Values, step: int | None, options: LibraryOptions
    ) -> None:
        """Images as lists of ``wandb.Image``."""
        wandb = self.import_library()
        run.log(
            {
                key: [wandb.Image(to_numpy(image)) for image in image_list(images)]
                for key, images in values.items()
            },
            step=step,
            **options,
        )

    def _log_table(self, run: Run, table: Table, step: int | None, options: LibraryOptions) -> None:
        """A ``wandb.Table``."""
        wandb = self.import_library()
        data = wandb.Table(columns=table.columns, data=table.data, dataframe=table.dataframe)
        run.log({table.name: data}, step=step, **options)

    def _finish(self, run: Run) -> None:
        run.finish()
