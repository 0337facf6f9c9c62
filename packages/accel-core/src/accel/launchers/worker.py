"""The worker entry point: what each process started by a launcher runs first.

``python -m accel.launchers.worker --script path.py args...`` (or ``--module name args...``):

* asks the kernel to send SIGTERM to this worker if its parent agent dies, so
  no worker is left running after the launcher is gone (Linux);
* runs the script as ``__main__``;
* when it succeeds, leaves the process group together with the other workers
  (:func:`accel.state.leave_process_group`);
* when it fails, records its rank and traceback for ``accel launch`` (in
  ``$ACCEL_LAUNCH_ERROR_DIR``) and for torchelastic's root-cause report.
"""

from __future__ import annotations

import json
import os
import runpy
import signal
import sys
import time
import traceback
from collections.abc import Mapping
from typing import TypedDict

from ..config.core_options import PROCESS_SECTION
from ..faults import flight


def _die_with_parent() -> None:
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGTERM, 0, 0, 0)
    except Exception:  # best effort only
        return
    if os.getppid() == 1:  # the parent is already gone
        os._exit(1)


def script_traceback(exc: BaseException, *runner_files: str) -> str:
    """The traceback of ``exc`` from the script's first frame on.

    The frames of runpy and of ``runner_files`` (the module that ran the script: this
    one, or a plugin's worker such as accel-ray's) are left out.
    """
    skip = (__file__, runpy.__file__, *runner_files)
    tb = exc.__traceback__
    while tb is not None and (
        tb.tb_frame.f_code.co_filename in skip
        or tb.tb_frame.f_code.co_filename.startswith("<frozen runpy")
    ):
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb))


class FailureRecord(TypedDict):
    """A failed worker's record (:func:`failure_record`), as written to ``$ACCEL_LAUNCH_ERROR_DIR``."""

    rank: int | str
    local_rank: int | str
    group_rank: int | str
    restart: int
    time: float
    exit_code: int
    error: str
    traceback: str
    refused: str | None


def failure_record(
    exc: BaseException | None,
    code: int,
    *,
    rank: int | str,
    local_rank: int | str,
    group_rank: int | str,
    restart: int = 0,
    runner_files: tuple[str, ...] = (),
) -> FailureRecord:
    """The record of a failed worker that ``accel launch`` reports ("rank N failed first").

    ``exc`` is what the script raised (None when it exited with ``code``). The keys are
    those of the JSON files in ``$ACCEL_LAUNCH_ERROR_DIR``: ``rank``, ``local_rank``,
    ``group_rank``, ``restart``, ``time``, ``exit_code``, ``error``, ``traceback``, ``refused``
    (the one-line message of a run refused with exit code 2, else None). A
    launcher plugin whose workers are not started by :func:`main` (accel-ray) builds its
    records here so that the report reads the same.
    """
    return {
        "rank": rank,
        "local_rank": local_rank,
        "group_rank": group_rank,
        "restart": restart,
        "time": time.time(),
        "exit_code": code,
        "error": f"{type(exc).__name__}: {exc}" if exc is not None else f"exit code {code}",
        "traceback": script_traceback(exc, *runner_files) if exc is not None else "",
        "refused": str(exc) if code == 2 and exc is not None else None,
    }


def _report(exc: BaseException | None, code: int) -> None:
    """Write this rank's failure record to ``$ACCEL_LAUNCH_ERROR_DIR`` (and torchelastic's file)."""
    directory = PROCESS_SECTION["launch_error_dir"].from_env()
    rank = os.environ.get("RANK", "?")
    record = failure_record(
        exc,
        code,
        rank=rank,
        local_rank=os.environ.get("LOCAL_RANK", "?"),
        group_rank=os.environ.get("GROUP_RANK", "?"),
        restart=int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") or 0),
    )
    if directory:
        name = f"rank{rank}-restart{record['restart']}-{os.getpid()}.json"
        _write_json_atomically(os.path.join(directory, name), record)
    torchelastic_file = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if exc is not None and torchelastic_file:
        # The agent polls for this file while the worker exits: written in place, it can be
        # read empty. The payload is the one torchelastic's own error handler writes.
        message = {
            "message": record["error"],
            "extraInfo": {
                "py_callstack": record["traceback"],
                "timestamp": str(int(record["time"])),
            },
        }
        _write_json_atomically(torchelastic_file, {"message": message})


def _write_json_atomically(path: str, data: Mapping[str, object]) -> None:
    """Write ``data`` to ``path`` so a reader sees no file or the whole file (best effort)."""
    partial = f"{path}.{os.getpid()}.partial"
    try:
        with open(partial, "w", encoding="utf-8") as fh:
            json.dump(data, fh)
        os.replace(partial, path)
    except OSError:
        pass


def _refused(exc: BaseException) -> bool:
    """Whether ``exc`` is a :class:`~accel.errors.UsageError`: bad input, reported on one line."""
    errors = sys.modules.get("accel.errors")  # loaded if the script used accel
    return errors is not None and isinstance(exc, errors.UsageError)


def _leave_process_group() -> None:
    """After a successful script: every process leaves its process group together."""
    state = sys.modules.get("accel.state")  # loaded only if the script used accel (and torch)
    if state is not None:
        state.leave_process_group()


def main(argv: list[str] | None = None) -> None:
    """Run the script or module named in ``argv`` as ``__main__``."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 2 or argv[0] not in ("--script", "--module"):
        sys.stderr.write("usage: python -m accel.launchers.worker --script PATH [ARGS...]\n")
        raise SystemExit(2)
    _die_with_parent()
    mode, target, args = argv[0], argv[1], argv[2:]
    try:
        if mode == "--module":
            sys.argv = [target, *args]
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            path = os.path.abspath(target)
            sys.argv = [target, *args]
            sys.path[0] = os.path.dirname(path)
            runpy.run_path(path, run_name="__main__")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if not code:
            _leave_process_group()
        flight.finish(code)
        if code:
            _report(None, code)
        raise
    except BaseException as exc:
        if _refused(exc):
            # the run cannot go on as configured (e.g. a checkpoint that this layout cannot
            # continue): one line, exit 2, nothing to restart for
            flight.finish(2, str(exc))
            _report(exc, 2)
            if not PROCESS_SECTION["launch_error_dir"].from_env():  # else the launcher says it
                sys.stderr.write(f"error: {exc}\n")
            raise SystemExit(2) from None
        flight.finish(1, f"{type(exc).__name__}: {exc}")
        _report(exc, 1)
        sys.stderr.write(script_traceback(exc))
        sys.stderr.flush()
        raise SystemExit(1) from None
    _leave_process_group()
    flight.finish(0)


__all__ = ["FailureRecord", "failure_record", "main", "script_traceback"]

if __name__ == "__main__":
    main()
