"""Launchers for ``distributed_type: XLA``: on this TPU host through ``xmp.spawn``, or on every
worker of a TPU pod through ``gcloud compute tpus tpu-vm ssh``.

``accel launch --tpu train.py`` runs ``python -m accel_tpu.spawn``, which imports the script
and runs its ``main_training_function`` on every device. With ``tpu_use_cluster``
(``--tpu_cluster``) the same ``accel launch`` runs on all pod workers instead. Both build
argv lists; importing this module imports neither torch nor torch_xla.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from typing import cast

from accel.config.core_options import KEYS, launched_distributed_type
from accel.launchers import Launcher, LaunchPlan

from . import pod
from .settings import XLA_TYPES, check_xla_config, launch_count, tpu_env_entries, xla_environment
from .settings import downcast_bf16 as _downcast
from .settings import is_xla as _is_xla

TPU_HINTS = ("TPU_NAME", "COLAB_TPU_ADDR", "TPU_ACCELERATOR_TYPE", "PJRT_DEVICE")
"""Environment variables showing that this notebook runs next to an XLA device."""


class XLALauncher(Launcher):
    """``distributed_type: XLA`` on this host: ``python -m accel_tpu.spawn`` (``xmp.spawn``)."""

    name = "xla"
    priority = 50

    def claims(self, config: Mapping[str, object]) -> bool:
        """XLA jobs that are not pod-wide."""
        return _is_xla(config) and not config.get("tpu_use_cluster")

    def command(self, config: Mapping[str, object], script: list[str]) -> list[str]:
        """``python -m accel_tpu.spawn --main_training_function F [--module] script args``."""
        check_xla_config(config)
        argv = [
            sys.executable,
            "-m",
            "accel_tpu.spawn",
            "--main_training_function",
            str(config.get("main_training_function") or "main"),
            "--num_processes",
            str(launch_count(config, "num_processes")),
        ]
        if config.get("module"):
            argv.append("--module")
        return argv + list(script)

    def plan(
        self, config: dict[str, object], script: list[str], environment: Mapping[str, str]
    ) -> LaunchPlan:
        """The spawn command; its environment adds bf16 downcasting, ``tpu_env`` and (on PJRT
        CPU) the number of devices."""
        argv = self.command(config, script)
        env = {**environment, **xla_environment(config)}
        return LaunchPlan.for_config(
            self.name,
            argv,
            config,
            script,
            env,
            num_machines=1,
            where="the XLA devices of this host",
        )

    def claims_notebook(self) -> bool:
        """In a notebook next to an XLA device (or ``ACCEL_DISTRIBUTED_TYPE=XLA``), unless CPU is forced."""
        from .runtime import xla_available

        if KEYS["use_cpu"].from_env() or not xla_available():
            return False
        requested = launched_distributed_type()
        return requested in XLA_TYPES or any(os.environ.get(name) for name in TPU_HINTS)

    def notebook_launch(
        self,
        function: Callable[..., object],
        args: tuple[object, ...],
        num_processes: int | None,
        mixed_precision: str,
    ) -> None:
        """Run ``function(*args)`` on the XLA devices from a notebook (forked ``xmp.spawn``)."""
        from .notebook import notebook_launch

        notebook_launch(function, args, num_processes, mixed_precision)


class TPUPodLauncher(Launcher):
    """``tpu_use_cluster: true``: run ``accel launch --tpu`` on every worker of the pod over gcloud ssh.

    The script and its files must be at the same path on every worker (as with a shared disk).
    """

    name = "tpu_pod"
    priority = 60

    def claims(self, config: Mapping[str, object]) -> bool:
        """XLA jobs with ``tpu_use_cluster``."""
        return _is_xla(config) and bool(config.get("tpu_use_cluster"))

    def command(self, config: Mapping[str, object], script: list[str]) -> list[str]:
        """``gcloud compute tpus tpu-vm ssh NAME --zone Z --command "cd DIR; accel launch --tpu ..." --worker all``."""
        check_xla_config(config)
        name = pod.check_tpu_name(cast("str | None", config.get("tpu_name")))
        zone = pod.check_tpu_zone(cast("str | None", config.get("tpu_zone")))
        launch = [
            "accel",
            "launch",
            "--tpu",
            "--no_tpu_cluster",
            "--num_processes",
            str(launch_count(config, "num_processes")),
            "--mixed_precision",
            str(config.get("mixed_precision") or "no"),
            "--downcast_bf16",
            "yes" if _downcast(config) else "no",
            "--main_training_function",
            str(config.get("main_training_function") or "main"),
        ]
        if config.get("module"):
            launch.append("--module")
        remote = pod.remote_launch(
            launch + list(script),
            workdir=os.getcwd(),
            env=tpu_env_entries(config),
            use_sudo=bool(config.get("tpu_use_sudo")),
        )
        return pod.gcloud_ssh(name, zone, remote)

    def plan(
        self, config: dict[str, object], script: list[str], environment: Mapping[str, str]
    ) -> LaunchPlan:
        """The gcloud command; every worker of the pod runs ``accel launch --tpu`` itself."""
        plan = super().plan(config, script, environment)
        plan.where = f"every worker of TPU pod {config.get('tpu_name')}"
        plan.machine_rank = None
        return plan


__all__ = [
    "TPU_HINTS",
    "TPUPodLauncher",
    "XLALauncher",
    "XLA_TYPES",
    "check_xla_config",
    "xla_environment",
]
