"""Compatibility path: ``python -m accel_cli._worker`` runs :mod:`accel.launchers.worker`."""

from __future__ import annotations

from accel.launchers.worker import main

__all__ = ["main"]

if __name__ == "__main__":
    main()
