"""Entry point of accel-tracker-example: registers the ``jsonl`` tracker."""

from __future__ import annotations

from accel.hookspecs import hookimpl


@hookimpl
def accel_trackers() -> list[type]:
    """The JSON-lines tracker."""
    from .tracker import JSONLinesTracker

    return [JSONLinesTracker]
