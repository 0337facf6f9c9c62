"""What each Ray Train worker of ``accel launch --ray`` runs: the script, as ``__main__``.

The worker is a Ray Train worker process: Ray has already set ``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK``, ``MASTER_ADDR``/``MASTER_PORT`` and initialised the process group, and
the job's runtime environment carries the launch's ``ACCEL_*`` variables, so the
script's ``Accelerator()`` joins Ray's group. A script that raises or exits non-zero
fails the worker with :class:`ScriptFailed`, which carries the same failure record a
local worker writes (rank, error, traceback) back to the driver.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
from typing import TYPE_CHECKING, TypedDict, cast

from accel.launchers.worker import FailureRecord, failure_record, script_traceback

if TYPE_CHECKING:
    from ray.train import TrainContext


class WorkerConfig(TypedDict):
    """``train_loop_config`` of the launch's ``TorchTrainer`` (see :func:`run_script`)."""

    script: list[str]
    module: bool
    cwd: str
    working_dir: bool


class ScriptFailed(RuntimeError):
    """The script of one Ray Train worker failed; ``record`` says which rank and how."""

    def __init__(self, record: str):
        super().__init__(record)
        self.record = record

    def __str__(self) -> str:
        info = json.loads(self.record)
        return f"rank {info['rank']}: {info['error']}"

    def info(self) -> FailureRecord:
        """The failure record as a dict (the keys of accel's local worker records)."""
        return json.loads(self.record)


def _record(context: TrainContext, exc: BaseException | None, code: int) -> str:
    record = failure_record(
        exc,
        code,
        rank=context.get_world_rank(),
        local_rank=context.get_local_rank(),
        group_rank=context.get_node_rank(),
        runner_files=(__file__,),
    )
    return json.dumps(record)


def _use_ray_device() -> None:
    """On GPU workers, accel uses the device Ray assigned (``ACCEL_TORCH_DEVICE``)."""
    from accel import env_vars
    from accel.config.core_options import KEYS, PROCESS_SECTION

    if PROCESS_SECTION["torch_device"].from_env() or KEYS["use_cpu"].from_env():
        return
    from ray.train.torch import get_device

    device = get_device()
    if device.type != "cpu":
        os.environ[env_vars.TORCH_DEVICE] = str(device)


def run_script(config: dict[str, object]) -> None:
    """``train_loop_per_worker`` of the launch: run ``config["script"]`` as ``__main__``.

    ``config`` (a :class:`WorkerConfig`): ``script`` (path or module and its
    arguments), ``module`` (run with ``-m``) and ``cwd`` (the launching directory, entered
    when it exists here and the runtime environment ships no ``working_dir``).
    """
    import ray.train

    launch = cast("WorkerConfig", config)  # the train_loop_config the driver built

    context = ray.train.get_context()
    cwd = launch.get("cwd")
    if cwd and os.path.isdir(cwd) and not launch.get("working_dir"):
        os.chdir(cwd)
    _use_ray_device()
    target, *args = launch["script"]
    sys.argv = [target, *args]
    try:
        if launch.get("module"):
            sys.path.insert(0, os.getcwd())
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            path = os.path.abspath(target)
            sys.path.insert(0, os.path.dirname(path))
            runpy.run_path(path, run_name="__main__")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        if code:
            raise ScriptFailed(_record(context, None, code)) from None
    except BaseException as exc:
        sys.stderr.write(script_traceback(exc, __file__))
        sys.stderr.flush()
        raise ScriptFailed(_record(context, exc, 1)) from None


__all__ = ["ScriptFailed", "run_script"]
