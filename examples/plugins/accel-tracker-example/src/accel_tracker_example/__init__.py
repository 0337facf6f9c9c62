"""An example third-party accel tracker: ``log_with="jsonl"`` writes JSON lines."""

from __future__ import annotations

from .tracker import JSONLinesTracker

__all__ = ["JSONLinesTracker"]
