"""TensorBoard, through ``torch.utils.tensorboard`` (library: ``tensorboard``). Always local."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

from ._base import LibraryOptions, LibraryTracker
from ._values import Values, flatten, image_list, is_number, plain_config

if TYPE_CHECKING:
    from torch.utils.tensorboard import SummaryWriter


class TensorBoardTracker(LibraryTracker["SummaryWriter"]):
    """Writes TensorBoard event files under ``logging_dir/run_name``.

    Args:
        run_name: the project name given to ``init_trackers``; the subdirectory written to.
        logging_dir: the Accelerator's logging directory.
        **kwargs: passed to ``torch.utils.tensorboard.SummaryWriter``.

    ``store_init_configuration`` writes the hyperparameters (HParams plugin) and the full
    configuration as JSON text (tag ``config``); ``log`` writes numbers as scalars,
    strings as text and dicts of numbers as grouped scalars; ``log_images`` writes images.
    """

    name = "tensorboard"
    requires_logging_directory = True
    library = "tensorboard"
    extra = "tensorboard"

    def __init__(
        self, run_name: str, logging_dir: str | os.PathLike | None = None, **kwargs: object
    ):
        super().__init__(run_name, logging_dir, **kwargs)
        self.logging_dir = os.path.join(self.logging_dir or "runs", run_name)

    def _create_run(self) -> SummaryWriter:
        self.import_library()
        from torch.utils.tensorboard import SummaryWriter

        return SummaryWriter(self.logging_dir, **self.init_kwargs)

    @property
    def writer(self) -> SummaryWriter | None:
        """The ``SummaryWriter`` (same as :attr:`tracker`)."""
        return self._run

    def _store_config(self, run: SummaryWriter, values: dict[str, object]) -> None:
        config = plain_config(values)
        hparams = {
            k: (v if isinstance(v, (bool, int, float, str)) else json.dumps(v))
            for k, v in flatten(config).items()
            if v is not None
        }
        run.add_hparams(hparams, metric_dict={}, run_name=".")
        run.add_text("config", json.dumps(config, indent=2, sort_keys=True))
        run.flush()

    def _log(
        self,
        run: SummaryWriter,
        values: dict[str, object],
        step: int | None,
        options: LibraryOptions,
    ) -> None:
        for key, value in values.items():
            if is_number(value):
                run.add_scalar(key, value, global_step=step, **options)
            elif isinstance(value, str):
                run.add_text(key, value, global_step=step, **options)
            elif isinstance(value, dict) and all(is_number(v) for v in value.values()):
                run.add_scalars(key, value, global_step=step, **options)
            else:
                run.add_text(key, str(value), global_step=step, **options)
        run.flush()

    def _log_images(
        self, run: SummaryWriter, values: Values, step: int | None, options: LibraryOptions
    ) -> None:
        """Image summaries, ``dataformats="HWC"`` by default, ``<tag>/<index>`` in a batch."""
        options.setdefault("dataformats", "HWC")
        for tag, images in values.items():
            batch = image_list(images)
            for index, image in enumerate(batch):
                name = tag if len(batch) == 1 else f"{tag}/{index}"
                run.add_image(name, image, global_step=step, **options)
        run.flush()

    def _finish(self, run: SummaryWriter) -> None:
        run.close()
