"""accel checkpoints and Ray Train: report them to Ray, resume from the one Ray restores.

* :func:`report_checkpoint` hands a complete ``save_state`` directory to
  ``ray.train.report`` from every rank (Ray needs every worker to call it); the lowest
  rank of each distinct directory passes it as the checkpoint, so a directory shared by
  all ranks (one machine, a shared file system) is uploaded once and node-local
  directories each once, into one Ray checkpoint named like accel's (``checkpoint_N``).
* :func:`restore_checkpoint` runs when ``accelerator.resume()`` starts (the
  ``accel_before_resume`` hook): after Ray restarted the worker group, it copies
  ``ray.train.get_checkpoint()`` into ``project_dir/checkpoints`` (under a temporary
  name, then renamed) unless a checkpoint of that name is already there; ``resume()``
  then loads the newest complete checkpoint as always.

The hooks receive core's :class:`accel.checkpoint.view.RunView`, never the Accelerator;
the public helpers take either (they read the attribute names both have:
``num_processes``, ``process_index``, ``is_local_main_process``, ``wait_for_everyone``),
except :func:`save_and_report`, which calls ``accelerator.save_state``.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import sys
from collections.abc import Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from accel.config.options import Option
from accel.logging import get_logger

if TYPE_CHECKING:
    from accel.checkpoint.view import RunView

logger = get_logger(__name__)

REPORT_ENV = "ACCEL_RAY_REPORT_CHECKPOINTS"
"""Set to ``true`` in a Ray Train worker to report every ``save_state()`` to Ray by itself."""
REPORT = Option("ray_report_checkpoints", bool, False, env=REPORT_ENV, flag=None, in_file=False)
"""The declaration :data:`REPORT_ENV` is read through."""
_NAME = re.compile(r"checkpoint_\d+")


class Run(Protocol):
    """What the helpers read of the Accelerator or of a hook's :class:`~accel.checkpoint.view.RunView`."""

    @property
    def num_processes(self) -> int: ...

    @property
    def process_index(self) -> int: ...

    @property
    def is_local_main_process(self) -> bool: ...

    def wait_for_everyone(self) -> None: ...


class Saver(Run, Protocol):
    """What :func:`save_and_report` uses of the Accelerator: :class:`Run` and ``save_state``."""

    def save_state(
        self,
        output_dir: str | os.PathLike | None = None,
        safe_serialization: bool = True,
        async_save: bool = False,
    ) -> str: ...


class _RayCheckpoint(Protocol):
    """What :func:`restore_checkpoint` uses of ``ray.train.Checkpoint`` (Train v1's or v2's)."""

    @property
    def path(self) -> str: ...

    def as_directory(self) -> AbstractContextManager[str]: ...


def in_ray_train_worker() -> bool:
    """Whether this process runs a Ray Train training function (cheap when Ray is not loaded)."""
    if "ray.train" not in sys.modules:
        return False
    import ray.train

    try:
        ray.train.get_context()
    except RuntimeError:
        return False
    return True


def auto_report() -> bool:
    """Whether every ``save_state()`` is reported: ``ACCEL_RAY_REPORT_CHECKPOINTS`` is true in this
    Ray Train worker (``accel launch --ray`` sets it from ``ray_config.ray_report_checkpoints``)."""
    return bool(REPORT.from_env()) and in_ray_train_worker()


def _uploads(run: Run, path: Path) -> bool:
    """Whether this rank is the lowest one seeing the directory ``path`` as it is here.

    Ranks compare ``(path, inode, mtime)``: equal on one machine or a shared file system,
    different for node-local copies.
    """
    stat = path.stat()
    mine = (str(path), stat.st_ino, stat.st_mtime_ns)
    if run.num_processes == 1:
        return True
    import torch.distributed as dist

    everyone: list[object] = [None] * run.num_processes
    dist.all_gather_object(everyone, mine)
    return everyone.index(mine) == run.process_index


def report_checkpoint(
    accelerator: Run, checkpoint: str | os.PathLike, metrics: Mapping[str, object] | None = None
) -> None:
    """Report the ``save_state`` directory ``checkpoint`` (and ``metrics``) to Ray Train.

    ``accelerator``: the Accelerator, or the :class:`~accel.checkpoint.view.RunView` a
    checkpoint hook received. Call it on every process, as ``save_state``. It waits for an ``async_save`` to finish,
    so Ray only ever receives complete checkpoints; the Ray checkpoint keeps accel's name
    (``checkpoint_N``) and the local directory is kept (``total_limit`` prunes it).
    """
    import ray.train

    accelerator.wait_for_everyone()  # an async save is complete after this
    path = Path(checkpoint).resolve()
    if not path.is_dir():
        raise FileNotFoundError(f"report_checkpoint: {path} is not a save_state directory")
    upload = _uploads(accelerator, path)
    ray.train.report(
        dict(metrics or {}),
        checkpoint=ray.train.Checkpoint.from_directory(str(path)) if upload else None,
        checkpoint_dir_name=_ray_name(path),
        delete_local_checkpoint_after_upload=False,
    )


_REPORTED: dict[str, int] = {}
"""How often this process reported each checkpoint name."""


def _ray_name(path: Path) -> str:
    """The Ray checkpoint name of ``path``: its own name, then ``name-1``, ``name-2``, ... again.

    Ray keeps one registered checkpoint per name: a second report under the same name (a
    ``save_state`` to a fixed directory) would overwrite the first in place, and pruning the
    older one (``num_to_keep``) would delete the newer. Every rank reports the same
    sequence of directories, so every rank picks the same name.
    """
    seen = _REPORTED.get(path.name, 0)
    _REPORTED[path.name] = seen + 1
    return path.name if not seen else f"{path.name}-{seen}"


def save_and_report(
    accelerator: Saver, metrics: Mapping[str, object] | None = None, **save_kwargs: Any
) -> str:
    """``accelerator.save_state(**save_kwargs)``, then :func:`report_checkpoint` of it; the path.

    When every save is already reported by itself (:func:`auto_report`), this saves only.
    """
    path = accelerator.save_state(**save_kwargs)
    if not auto_report():
        report_checkpoint(accelerator, path, metrics)
    return path


def report_saved(run: RunView, path: str) -> None:
    """The ``accel_checkpoint_saved`` hook: report the new checkpoint when :func:`auto_report`.

    ``run``: the hook's :class:`~accel.checkpoint.view.RunView`.
    """
    if auto_report():
        report_checkpoint(run, path, {"step": run.step})


def restore_checkpoint(accelerator: Run, checkpoint_root: str | os.PathLike) -> Path | None:
    """Copy Ray's restored checkpoint into ``checkpoint_root``; its path there, or None.

    ``accelerator``: the Accelerator, or the :class:`~accel.checkpoint.view.RunView` of the
    ``accel_before_resume`` hook. Call it on every process: the local main process of each machine copies, the others
    wait for it. None outside a Ray Train worker, when Ray has no checkpoint for this run,
    or when its name is not accel's ``checkpoint_N`` (then it is left alone, with a warning).
    """
    if not in_ray_train_worker():
        return None
    import ray.train

    checkpoint = ray.train.get_checkpoint()
    if checkpoint is None:
        return None
    name = Path(checkpoint.path).name
    if not _NAME.fullmatch(name):
        logger.warning(
            f"Ray's checkpoint {checkpoint.path} is not named checkpoint_N: resume() ignores it "
            "(report save_state directories with accel_ray.report_checkpoint)"
        )
        return None
    target = Path(checkpoint_root) / name
    if accelerator.is_local_main_process and not target.exists():
        _copy_in(checkpoint, target)
        logger.info(f"restored Ray Train checkpoint {checkpoint.path} to {target}")
    accelerator.wait_for_everyone()
    return target


def _copy_in(checkpoint: _RayCheckpoint, target: Path) -> None:
    """Copy ``checkpoint`` to ``target`` under a temporary name, then rename it (atomic)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    # ends like an unfinished save_state (".accel-tmp"): accel sweeps what a crash leaves
    staging = target.with_name(f"{target.name}.ray-{socket.gethostname()}-{os.getpid()}.accel-tmp")
    try:
        with checkpoint.as_directory() as source:
            shutil.copytree(source, staging, dirs_exist_ok=True)
        os.rename(staging, target)
    except OSError:
        if not target.is_dir():  # not another machine's copy renamed first: a real failure
            raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


__all__ = [
    "REPORT_ENV",
    "auto_report",
    "in_ray_train_worker",
    "report_checkpoint",
    "restore_checkpoint",
    "save_and_report",
]
