"""Aim (library: ``aim``). Always local: a repository in the logging directory."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ._base import LibraryOptions, LibraryTracker
from ._values import Values, image_list, is_number, plain_config, to_numpy

if TYPE_CHECKING:
    from aim import Run


class AimTracker(LibraryTracker["Run"]):
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

    def __init__(
        self, run_name: str, logging_dir: str | os.PathLike | None = ".", **kwargs: object
    ):
        super().__init__(run_name, logging_dir or ".", **kwargs)

    def _create_run(self) -> Run:
        aim = self.import_library()
        kwargs = dict(self.init_kwargs)
        kwargs.setdefault("experiment", self.run_name)
        repo = self.logging_dir or "."
        os.makedirs(repo, exist_ok=True)
        run = aim.Run(repo=repo, **kwargs)
        run.name = self.run_name
        return run

    def _store_config(self, run: Run, values: dict[str, object]) -> None:
        run["hparams"] = plain_config(values)

    def _log(
        self, run: Run, values: dict[str, object], step: int | None, options: LibraryOptions
    ) -> None:
        for key, value in values.items():
            if is_number(value):
                run.track(value, name=key, step=step, **options)
            elif isinstance(value, str):
                aim = self.import_library()
                run.track(aim.Text(value), name=key, step=step, **options)

    def _log_images(
        self, run: Run, values: Values, step: int | None, options: LibraryOptions
    ) -> None:
        """Tracked ``aim.Image`` objects, a list for a batch.

        As in Accelerate, ``log_images(values, step, kwargs={"aim_image": {...}, "track": {...}})``
        passes arguments to ``aim.Image`` and to ``run.track``.
        """
        aim = self.import_library()
        kwargs: dict[str, LibraryOptions] = options.get("kwargs") or {}
        for key, images in values.items():
            batch = [
                aim.Image(to_numpy(image), **kwargs.get("aim_image", {}))
                for image in image_list(images)
            ]
            run.track(
                batch if len(batch) > 1 else batch[0],
                name=key,
                step=step,
                **kwargs.get("track", {}),
            )

    def _finish(self, run: Run) -> None:
        run.close()
