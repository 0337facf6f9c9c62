"""accel-ft: fault-tolerant data parallelism on torchft for accel.

``accel launch --ft`` runs an unchanged script as replica groups; when one fails the others
keep training, and the restarted group heals from a live peer (docs/fault-tolerant-training.md).
The plugin's pieces: :mod:`accel_ft.backend` (models, optimizers, loaders),
:mod:`accel_ft.session` (torchft's Manager, step by step), :mod:`accel_ft.data` (each step's
share of the global sample order), :mod:`accel_ft.runstate` (what a healing group receives),
:mod:`accel_ft.launcher` and :mod:`accel_ft.supervisor` (the lighthouse and the groups).
"""

from __future__ import annotations

from .config import FT_SECTION

__all__ = ["FT_SECTION"]
