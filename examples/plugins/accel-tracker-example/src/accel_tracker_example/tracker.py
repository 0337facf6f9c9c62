"""``JSONLinesTracker``: appends one JSON object per call to ``<logging_dir>/<run_name>.jsonl``."""

from __future__ import annotations

import json
import os
from typing import Any

from accel.tracking import GeneralTracker, on_main_process


class JSONLinesTracker(GeneralTracker):
    """Writes ``{"event": ..., ...}`` lines: ``config``, ``log`` (with ``step``) and ``finish``."""

    name = "jsonl"
    requires_logging_directory = True

    def __init__(self, run_name: str, logging_dir: str | os.PathLike = ".", **kwargs: Any):
        super().__init__()
        self.run_name = run_name
        self.path = os.path.join(os.fspath(logging_dir), f"{run_name}.jsonl")
        self._file = None

    @on_main_process
    def start(self) -> None:
        """Open the file (once)."""
        if self._file is None:
            os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
            self._file = open(self.path, "a", encoding="utf-8")

    @property
    def tracker(self) -> Any:
        """The open file."""
        return self._file

    def _write(self, record: dict[str, Any]) -> None:
        self.start()
        self._file.write(json.dumps(record, default=_plain) + "\n")
        self._file.flush()

    @on_main_process
    def store_init_configuration(self, values: dict[str, Any]) -> None:
        """Write the configuration."""
        self._write({"event": "config", "values": values})

    @on_main_process
    def log(self, values: dict[str, Any], step: int | None = None, **kwargs: Any) -> None:
        """Write ``values`` at ``step``."""
        self._write({"event": "log", "step": step, "values": values})

    @on_main_process
    def finish(self) -> None:
        """Write the end marker and close the file."""
        if self._file is not None:
            self._write({"event": "finish"})
            self._file.close()
            self._file = None


def _plain(value: Any) -> Any:
    item = getattr(value, "item", None)
    return item() if callable(item) else str(value)
