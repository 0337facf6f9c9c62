"""What each replica started by ``xmp.spawn`` runs first: its own accel state, then the function."""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from collections.abc import Callable

from accel.config.core_options import PROCESS_SECTION


def report_failure(rank: int | str, exc: BaseException, with_traceback: bool = True) -> None:
    """Print the error and record it where ``accel launch`` looks (``ACCEL_LAUNCH_ERROR_DIR``).

    ``accel launch`` then names the replica that failed first and its error.
    """
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    if with_traceback:
        sys.stderr.write(text)
        sys.stderr.flush()
    else:
        text = ""
    directory = PROCESS_SECTION["launch_error_dir"].from_env()
    if not directory:
        return
    record = {
        "rank": rank,
        "local_rank": rank,
        "group_rank": os.environ.get("TPU_WORKER_ID", "0"),
        "restart": 0,
        "time": time.time(),
        "exit_code": 1,
        "error": f"{type(exc).__name__}: {exc}",
        "traceback": text,
    }
    try:
        with open(os.path.join(directory, f"xla{rank}-{os.getpid()}.json"), "w") as fh:
            json.dump(record, fh)
    except OSError:
        pass


class Replica:
    """A picklable ``xmp.spawn`` target calling ``function(*args)`` (without the ordinal).

    torch_xla runs one thread per device when a process drives several (TPU v2/v3, PJRT
    CPU devices): the process, accelerator and gradient states are made per-thread before
    any replica starts, so each one's ``Accelerator`` sees its own ordinal and device.
    """

    def __init__(self, function: Callable[..., object]):
        self.function = function

    def __setstate__(self, state: dict[str, object]) -> None:
        # unpickled in the spawned process before its replica threads start
        from accel.state import use_thread_local_state

        use_thread_local_state()
        self.__dict__.update(state)

    def __call__(self, index: int, *args: object) -> object:
        """Run the function in replica ``index`` (its global ordinal, given by ``xmp.spawn``)."""
        from accel.state import use_thread_local_state

        use_thread_local_state()
        try:
            return self.function(*args)
        except BaseException as exc:
            report_failure(index, exc)
            raise


def spawn(
    function: Callable[..., object],
    args: tuple = (),
    num_processes: int | None = None,
    start_method: str = "spawn",
) -> None:
    """Run ``function(*args)`` on every XLA device through ``xmp.spawn``.

    ``num_processes`` 1 runs a single replica in this process; any other value uses every
    device the runtime sees (torch_xla chooses: limit it with ``TPU_NUM_DEVICES`` /
    ``CPU_NUM_DEVICES``).
    """
    import torch_xla.distributed.xla_multiprocessing as xmp
    from accel.state import use_thread_local_state

    if start_method == "fork":
        use_thread_local_state()  # forked children inherit it; the spawn method unpickles Replica
    xmp.spawn(
        Replica(function),
        args=args,
        nprocs=1 if num_processes == 1 else None,
        start_method=start_method,
    )
