"""Entry-point module of accel-trackers: registers the seven trackers. Imports no tracking library."""

from __future__ import annotations

from accel.hookspecs import hookimpl


@hookimpl
def accel_trackers() -> list[type]:
    """TensorBoard, W&B, Comet ML, Aim, MLflow, ClearML and DVCLive trackers."""
    from . import TRACKERS

    return list(TRACKERS)


@hookimpl
def accel_env_info() -> dict[str, str]:
    """A line for ``accel env``: which tracking libraries are installed."""
    from . import TRACKERS

    installed = [cls.name for cls in TRACKERS if cls.is_available()]
    missing = [cls.name for cls in TRACKERS if cls.name not in installed]
    line = ", ".join(installed) or "none"
    if missing:
        line += f" (not installed: {', '.join(missing)})"
    return {"Trackers": line}
