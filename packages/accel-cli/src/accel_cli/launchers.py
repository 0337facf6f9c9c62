"""Compatibility path: the local launchers live in :mod:`accel.launchers.local` (accel-core)."""

from __future__ import annotations

from accel.launchers.local import WORKER_MODULE, SimpleLauncher, TorchrunLauncher

__all__ = ["SimpleLauncher", "TorchrunLauncher", "WORKER_MODULE"]
