"""accel-ray: accel inside Ray Train, and ``accel launch --ray`` on a Ray cluster.

* An ``Accelerator()`` created in a ``TorchTrainer``'s ``train_loop_per_worker`` joins the
  process group Ray set up; :func:`report_checkpoint` / :func:`save_and_report` hand
  ``save_state`` checkpoints to ``ray.train.report``, and ``accelerator.resume()`` picks up
  ``ray.train.get_checkpoint()`` after Ray restarted the workers
  (:mod:`accel_ray.checkpoints`).
* ``accel launch --ray`` runs an unchanged script on a Ray cluster, one Ray Train worker per
  process (:mod:`accel_ray.launcher`, :mod:`accel_ray.driver`, :mod:`accel_ray.worker`).

Importing this package imports neither Ray nor torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from accel.lazy import exports, installed_version

if TYPE_CHECKING:  # what type checkers and editors follow; at run time names load on first use
    from accel_ray.checkpoints import in_ray_train_worker as in_ray_train_worker
    from accel_ray.checkpoints import report_checkpoint as report_checkpoint
    from accel_ray.checkpoints import restore_checkpoint as restore_checkpoint
    from accel_ray.checkpoints import save_and_report as save_and_report

    __version__: str

_NAMES = {
    "report_checkpoint": "accel_ray.checkpoints",
    "save_and_report": "accel_ray.checkpoints",
    "restore_checkpoint": "accel_ray.checkpoints",
    "in_ray_train_worker": "accel_ray.checkpoints",
}
"""Public names and the module defining each, imported on first use."""

__all__ = sorted(_NAMES)

__getattr__, __dir__ = exports(
    __name__, _NAMES, computed={"__version__": installed_version("accel-ray")}
)
