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

from typing import Any

_LAZY = {
    "report_checkpoint": "accel_ray.checkpoints",
    "save_and_report": "accel_ray.checkpoints",
    "restore_checkpoint": "accel_ray.checkpoints",
    "in_ray_train_worker": "accel_ray.checkpoints",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    """The helpers of :mod:`accel_ray.checkpoints` (loaded on first use), and ``__version__``."""
    if name == "__version__":
        from accel.imports import installed_version

        value = globals()["__version__"] = installed_version("accel-ray")
        return value
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'accel_ray' has no attribute {name!r}")
