"""Launching: the :class:`Launcher` ABC, the :class:`LaunchPlan` it builds, and the planning.

* :class:`Launcher` / :class:`LaunchPlan` (:mod:`accel.launchers.base`): what a launcher
  plugin implements and returns.
* :mod:`accel.launchers.local`: core's ``simple`` and ``torchrun`` launchers (a default
  plugin) and helpers other launchers reuse (:func:`worker_command`, ...).
* :mod:`accel.launchers.planning`: :func:`plan_launch` (settings -> plan),
  :func:`choose_launcher`, :func:`worker_environment`.
* :mod:`accel.launchers.worker`: ``python -m accel.launchers.worker``, what each worker
  runs first (not imported here, so that ``-m`` runs it cleanly).
* :mod:`accel.launchers.notebook`: ``notebook_launcher`` / ``debug_launcher``.
* :mod:`accel.launchers.arguments`: Accelerate's ``prepare_multi_gpu_env`` (launch
  arguments -> the torchrun plan's environment), exported from :mod:`accel.utils`.

Importing this package imports neither torch nor any plugin.
"""

from __future__ import annotations

from ..errors import UsageError
from .base import Launcher, LaunchPlan
from .local import WORKER_MODULE, SimpleLauncher, TorchrunLauncher, worker_command
from .planning import choose_launcher, plan_launch, worker_environment

__all__ = [
    "LaunchPlan",
    "Launcher",
    "SimpleLauncher",
    "TorchrunLauncher",
    "UsageError",
    "WORKER_MODULE",
    "choose_launcher",
    "plan_launch",
    "worker_command",
    "worker_environment",
]
