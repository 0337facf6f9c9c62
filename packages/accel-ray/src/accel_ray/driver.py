"""The Ray Train driver of ``accel launch --ray``: ``python -m accel_ray.driver --script train.py ...``.

Run (and supervised, like torchrun) by ``accel launch`` on the launching machine, with
the launch's environment: the resolved settings in ``ACCEL_LAUNCH_CONFIG`` (its
``ray_config`` section says where and how) and the workers' variables in
:data:`accel_ray.launcher.WORKER_ENV`. It connects to the Ray cluster, runs a
``TorchTrainer`` whose ``num_workers`` workers each run the script
(:func:`accel_ray.worker.run_script`), and exits with the job's status. With a range
(``ray_num_workers: MIN:MAX``) Ray Train runs it elastically: after a lost worker it
restarts the group at the size the cluster then holds, and grows it when nodes join; each
new group resumes from the last reported checkpoint (``accelerator.resume()``).

* 0 when every worker's script finished;
* a failing script's exit code (1 for an exception) once Ray gives up
  (``ray_max_failures`` restarts used); each failing rank's record goes to
  ``$ACCEL_LAUNCH_ERROR_DIR``, where ``accel launch`` reads it to report the first
  failing rank and its traceback as for a local launch;
* 130 after SIGINT or SIGTERM: Ray Train aborts the run (its workers are killed) first.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, cast

from accel.config.core_options import PROCESS_SECTION
from accel.config.launched import launched_config

from .checkpoints import REPORT_ENV
from .config import RaySettings
from .launcher import WORKER_ENVIRONMENT, num_workers, ray_settings
from .worker import FailureRecord

if TYPE_CHECKING:
    from ray.train.torch import TorchTrainer

PROG = "accel launch"
INTERRUPTED = 130
"""Exit code after SIGINT / SIGTERM."""


def _usage() -> int:
    sys.stderr.write(
        "usage: python -m accel_ray.driver {--script PATH | --module NAME} [ARGS...]\n"
    )
    return 2


QUIET_PRINT = {"RAY_TRAIN_ENABLE_PRINT_PATCH": "0"}
"""Workers' ``print`` goes straight to their output (Ray Train would also log each line)."""


def runtime_env(settings: RaySettings) -> dict[str, object]:
    """The job's runtime environment: the user's, with the workers' variables in ``env_vars``.

    ``ACCEL_RAY_REPORT_CHECKPOINTS`` comes from ``ray_report_checkpoints`` unless the
    user's ``env_vars`` or the launching environment set it.
    """
    env = dict(settings.get("ray_runtime_env") or {})
    workers = json.loads(WORKER_ENVIRONMENT.from_env() or "{}")
    report = {REPORT_ENV: "true" if settings.get("ray_report_checkpoints", True) else "false"}
    user = cast("Mapping[str, str]", env.get("env_vars") or {})
    env["env_vars"] = {**QUIET_PRINT, **report, **user, **workers}
    return env


class _Scaling(TypedDict):
    num_workers: int | tuple[int, int]
    use_gpu: bool
    resources_per_worker: dict[str, float] | None


class ScalingOptions(_Scaling, total=False):
    """``ScalingConfig`` arguments (:func:`scaling_options`); the interval only for a range."""

    elastic_resize_monitor_interval_s: float


def scaling_options(config: Mapping[str, object]) -> ScalingOptions:
    """``ScalingConfig`` arguments: ``num_workers`` (a number or Ray Train's elastic
    ``(min, max)``), the workers' resources, and for a range ``ray_resize_interval``."""
    settings = ray_settings(config)
    resources = dict(settings.get("ray_resources_per_worker") or {})
    options: ScalingOptions = {
        "num_workers": num_workers(config),
        "use_gpu": resources.get("GPU", 0) > 0,
        "resources_per_worker": resources or None,
    }
    interval = settings.get("ray_resize_interval")
    if isinstance(options["num_workers"], tuple) and interval is not None:
        options["elastic_resize_monitor_interval_s"] = float(interval)
    return options


def trainer_for(config: Mapping[str, object], script: list[str], module: bool) -> TorchTrainer:
    """The ``TorchTrainer`` running ``script`` on ``ray_num_workers`` workers (or a range)."""
    from ray.train import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    from .worker import run_script

    settings = ray_settings(config)
    name = (
        settings.get("ray_name") or f"accel-{Path(script[0]).stem}-{time.strftime('%Y%m%d-%H%M%S')}"
    )
    # ray.train exports Train v1's or v2's config classes, chosen when it is imported
    # (RAY_TRAIN_V2_ENABLED); a type checker sees both, so they travel untyped here
    scaling: dict[str, Any] = dict(scaling_options(config))
    run_options: dict[str, Any] = {
        "failure_config": FailureConfig(max_failures=int(settings.get("ray_max_failures") or 0)),
        "checkpoint_config": CheckpointConfig(num_to_keep=settings.get("ray_num_to_keep")),
    }
    configs: dict[str, Any] = {
        "scaling_config": ScalingConfig(**scaling),
        "run_config": RunConfig(
            name=name, storage_path=settings.get("ray_storage_path"), **run_options
        ),
    }
    return TorchTrainer(
        run_script,
        train_loop_config={
            "script": list(script),
            "module": module,
            "cwd": os.getcwd(),
            "working_dir": bool((settings.get("ray_runtime_env") or {}).get("working_dir")),
        },
        **configs,
    )


def failure_records(error: BaseException) -> list[FailureRecord]:
    """The failure record of each failing rank of a ``WorkerGroupError``."""
    from .worker import ScriptFailed

    records: list[FailureRecord] = []
    for rank, failure in sorted(getattr(error, "worker_failures", {}).items()):
        found = failure
        while found is not None and not isinstance(found, ScriptFailed):
            found = getattr(found, "cause", None) or found.__cause__
        if isinstance(found, ScriptFailed):
            records.append(found.info())
            continue
        # the worker process died (killed, out of memory) or Ray itself failed
        records.append(
            {
                "rank": rank,
                "local_rank": "?",
                "group_rank": "?",
                "restart": 0,
                "time": time.time(),
                "exit_code": 1,
                "error": f"{type(failure).__name__}: {str(failure).strip().splitlines()[0] if str(failure).strip() else ''}",
                "traceback": "",
                "refused": None,
            }
        )
    return records


def _write_records(records: list[FailureRecord]) -> None:
    """Put the records where ``accel launch`` reads them (or print the first one)."""
    directory = PROCESS_SECTION["launch_error_dir"].from_env()
    if not directory:
        first = min(records, key=lambda r: r["time"])
        sys.stderr.write(f"{PROG}: worker rank {first['rank']} failed first: {first['error']}\n")
        return
    for record in records:
        name = f"ray-rank{record['rank']}-{os.getpid()}.json"
        with open(os.path.join(directory, name), "w", encoding="utf-8") as handle:
            json.dump(record, handle)


class _Init(TypedDict):
    runtime_env: dict[str, object]
    log_to_driver: bool


class _InitOptions(_Init, total=False):
    """``ray.init`` arguments besides the address."""

    include_dashboard: bool


def _signals_seen(read_fd: int) -> set[int]:
    """The signals recorded on the wakeup pipe (whoever's handler ran)."""
    seen: set[int] = set()
    try:
        while chunk := os.read(read_fd, 64):
            seen.update(chunk)
    except BlockingIOError:
        pass
    return seen


def main(argv: list[str] | None = None) -> int:
    """Run the script named in ``argv`` on the Ray cluster; the job's exit status."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 2 or argv[0] not in ("--script", "--module"):
        return _usage()
    module, script = argv[0] == "--module", argv[1:]
    config = launched_config()
    settings = ray_settings(config)
    import ray
    import ray.exceptions

    try:
        from ray.train import TrainingFailedError, WorkerGroupError
    except ImportError:  # Ray Train V1: no worker-group errors to report ranks from
        sys.stderr.write(
            f"{PROG}: error: --ray needs Ray Train V2 (ray {ray.__version__} runs V1): "
            "install a newer ray[train], or unset RAY_TRAIN_V2_ENABLED=0\n"
        )
        return 2

    for name, value in QUIET_PRINT.items():  # Ray Train hands it on to its controller
        os.environ.setdefault(name, value)
    workers = num_workers(config)
    if isinstance(workers, tuple) and not settings.get("ray_max_failures"):
        sys.stderr.write(
            f"{PROG}: warning: --ray_num_workers {workers[0]}:{workers[1]} with "
            "--ray_max_failures 0: a lost worker ends the run (Ray only grows the group); "
            "set --ray_max_failures N to continue at a smaller size\n"
        )

    address = settings.get("ray_address")
    init: _InitOptions = {"runtime_env": runtime_env(settings), "log_to_driver": True}
    if not address and not os.environ.get("RAY_ADDRESS"):
        init["include_dashboard"] = False  # a new local instance: no web server
    try:
        ray.init(address=address, **init)
    except (ConnectionError, ValueError, RuntimeError) as exc:
        where = address or os.environ.get("RAY_ADDRESS") or "a new local instance"
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        sys.stderr.write(f"{PROG}: error: cannot connect to the Ray cluster at {where}: {first}\n")
        return 2
    # Ray Train's own SIGINT handler aborts the run gracefully; SIGTERM is sent on as SIGINT.
    # The wakeup pipe records either signal, whoever's handler runs.
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    os.set_blocking(write_fd, False)
    signal.set_wakeup_fd(write_fd)
    signal.signal(signal.SIGTERM, lambda *_: os.kill(os.getpid(), signal.SIGINT))
    code, failure = 0, None
    try:
        trainer_for(config, script, module).fit()
    except WorkerGroupError as exc:
        records = failure_records(exc)
        if records:
            _write_records(records)
            code = int(min(records, key=lambda r: r["time"])["exit_code"]) or 1
        else:  # no worker named: report Ray's own error
            code, failure = 1, exc
    except TrainingFailedError as exc:  # the controller failed, not a worker
        sys.stderr.write(f"{PROG}: the Ray Train run failed: {exc}\n")
        code = 1
    except (KeyboardInterrupt, SystemExit, ray.exceptions.RayActorError) as exc:
        # Ray Train's SIGINT handler ends fit() this way; otherwise its controller died
        code, failure = 1, exc
    finally:
        ray.shutdown()
        signal.set_wakeup_fd(-1)
        os.close(write_fd)
    seen = _signals_seen(read_fd)
    os.close(read_fd)
    if seen & {signal.SIGINT, signal.SIGTERM}:
        sys.stderr.write(f"{PROG}: the Ray Train run was aborted; its workers are stopped\n")
        return INTERRUPTED
    if failure is not None:
        sys.stderr.write(f"{PROG}: the Ray Train run ended unexpectedly: {failure!r}\n")
    return code


if __name__ == "__main__":
    raise SystemExit(main())
