"""Weights & Biases (library: ``wandb``). Offline unless W&B is configured."""

from __future__ import annotations

import netrc
import os
from typing import Any
from urllib.parse import urlparse

from accel.tracking import on_main_process

from ._base import LibraryTracker, announce_local, env_set, image_list, plain_config, to_numpy


def wandb_configured(kwargs: dict[str, Any]) -> bool:
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


class WandBTracker(LibraryTracker):
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

    def _create_run(self) -> Any:
        wandb = self.import_library()
        kwargs = dict(self.init_kwargs)
        # explicit, as W&B otherwise keeps the directory of the first run of the process
        kwargs.setdefault("dir", os.path.abspath(self.logging_dir or os.getcwd()))
        if not wandb_configured(kwargs):
            kwargs["mode"] = "offline"
            where = os.path.join(kwargs["dir"], "wandb")
            announce_local(
                "wandb", where, "Set WANDB_MODE=online (or `wandb login`) to sync to W&B."
            )
        os.makedirs(kwargs["dir"], exist_ok=True)
        return wandb.init(project=self.run_name, **kwargs)

    def _store_config(self, values: dict[str, Any]) -> None:
        self._run.config.update(plain_config(values), allow_val_change=True)

    def _log(self, values: dict[str, Any], step: int | None, **kwargs: Any) -> None:
        self._run.log(values, step=step, **kwargs)

    @on_main_process
    def log_images(self, values: dict[str, Any], step: int | None = None, **kwargs: Any) -> None:
        """Log images: ``{key: HWC image or list/batch of images}`` as ``wandb.Image`` lists."""
        if not self._ensure_run():
            return
        wandb = self.import_library()
        self._run.log(
            {
                key: [wandb.Image(to_numpy(image)) for image in image_list(images)]
                for key, images in values.items()
            },
            step=step,
            **kwargs,
        )

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
        """Log a ``wandb.Table`` from ``columns`` + ``data`` rows or a pandas ``dataframe``."""
        if not self._ensure_run():
            return
        wandb = self.import_library()
        table = wandb.Table(columns=columns, data=data, dataframe=dataframe)
        self._run.log({table_name: table}, step=step, **kwargs)

    def _finish(self) -> None:
        self._run.finish()
