"""Aim (library: ``aim``). Always local: a repository in the logging directory."""

from __future__ import annotations

import os
from typing import Any

from accel.tracking import on_main_process

from ._base import LibraryTracker, image_list, is_number, plain_config, to_numpy


class AimTracker(LibraryTracker):
    """An Aim run in the repository ``logging_dir`` (``.aim`` is created there).

    ``aim.Run(repo=logging_dir, experiment=run_name, **kwargs)``, named ``run_name`` (the
    project name of ``init_trackers``, as in Accelerate); the configuration is
    stored as ``run["hparams"]``, numbers are tracked with ``run.track(value, name, step)``.
    Open the results with ``aim up --repo <logging_dir>``.
    """

    name = "aim"
    requires_logging_directory = True
    library = "aim"
    extra = "aim"

    def __init__(self, run_name: str, logging_dir: str | os.PathLike | None = ".", **kwargs: Any):
        super().__init__(run_name, logging_dir or ".", **kwargs)

    def _create_run(self) -> Any:
        aim = self.import_library()
        kwargs = dict(self.init_kwargs)
        kwargs.setdefault("experiment", self.run_name)
        repo = self.logging_dir or "."
        os.makedirs(repo, exist_ok=True)
        run = aim.Run(repo=repo, **kwargs)
        run.name = self.run_name
        return run

    def _store_config(self, values: dict[str, Any]) -> None:
        self._run["hparams"] = plain_config(values)

    def _log(self, values: dict[str, Any], step: int | None, **kwargs: Any) -> None:
        for key, value in values.items():
            if is_number(value):
                self._run.track(value, name=key, step=step, **kwargs)
            elif isinstance(value, str):
                aim = self.import_library()
                self._run.track(aim.Text(value), name=key, step=step, **kwargs)

    @on_main_process
    def log_images(
        self, values: dict[str, Any], step: int | None = None, kwargs: dict | None = None
    ) -> None:
        """Track images: ``{name: image or list/batch of images}``.

        ``kwargs`` may hold ``{"aim_image": {...}, "track": {...}}``: arguments of
        ``aim.Image`` and of ``run.track``.
        """
        if not self._ensure_run():
            return
        aim = self.import_library()
        kwargs = kwargs or {}
        for key, images in values.items():
            batch = [
                aim.Image(to_numpy(image), **kwargs.get("aim_image", {}))
                for image in image_list(images)
            ]
            self._run.track(
                batch if len(batch) > 1 else batch[0],
                name=key,
                step=step,
                **kwargs.get("track", {}),
            )

    def _finish(self) -> None:
        self._run.close()
