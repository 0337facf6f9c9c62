"""The settings ``accel launch`` resolved, as a worker process reads them (``ACCEL_LAUNCH_CONFIG``)."""

from __future__ import annotations

from accel.config.options import launched_config

__all__ = ["launched_config"]
