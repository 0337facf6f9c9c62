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
from typing import Any

from accel import environment
from accel.errors import ConfigError
from accel.launchers import Launcher

from . import pod

XLA_TYPES = ("XLA", "TPU")
"""``distributed_type`` values these launchers serve."""
TPU_HINTS = ("TPU_NAME", "COLAB_TPU_ADDR", "TPU_ACCELERATOR_TYPE", "PJRT_DEVICE")
"""Environment variables showing that this notebook runs next to an XLA device."""


def _is_xla(config: dict[str, Any]) -> bool:
    return str(config.get("distributed_type") or "").upper() in XLA_TYPES


def _downcast(config: dict[str, Any]) -> bool:
    value = str(config.get("downcast_bf16") or "no").strip().lower()
    if value not in ("no", "yes", "true", "false", "1", "0"):
        raise ConfigError(f"downcast_bf16 {value!r}: use yes or no")
    return value in ("yes", "true", "1")


def check_xla_config(config: dict[str, Any]) -> None:
    """Reject settings XLA cannot run, naming the key and what to do."""
    if config.get("no_python"):
        raise ConfigError("--no_python cannot be used with --tpu: the script must be Python")
    if int(config.get("num_machines") or 1) > 1 and not config.get("tpu_use_cluster"):
        raise ConfigError(
            "num_machines > 1 with distributed_type XLA: a TPU pod is launched on all its "
            "workers at once; use --tpu_cluster (tpu_use_cluster: true) with tpu_name and tpu_zone"
        )
    precision = str(config.get("mixed_precision") or "no")
    if precision not in ("no", "bf16"):
        raise ConfigError(
            f"mixed_precision {precision} is not supported on XLA devices: use bf16 or no"
        )
    function = config.get("main_training_function") or "main"
    if not str(function).isidentifier():
        raise ConfigError(f"main_training_function {function!r} is not a Python function name")
    _downcast(config)
    pod.check_env_entries(config.get("tpu_env"))


def xla_environment(config: dict[str, Any]) -> dict[str, str]:
    """Variables the XLA runtime reads at start-up: bf16 downcasting, ``tpu_env``, CPU devices."""
    env: dict[str, str] = {}
    if _downcast(config):
        # float32 runs as bfloat16 (and float64 as float32) on the device
        env.update(XLA_USE_BF16="0", XLA_DOWNCAST_BF16="1")
    for entry in pod.check_env_entries(config.get("tpu_env")):
        name, _, value = entry.partition("=")
        env[name] = value
    count = int(config.get("num_processes") or 1)
    if os.environ.get("PJRT_DEVICE", "").upper() == "CPU" and "CPU_NUM_DEVICES" not in os.environ:
        # PJRT's CPU devices stand in for TPU cores (testing): one per requested process
        env["CPU_NUM_DEVICES"] = str(count)
    return env


class XLALauncher(Launcher):
    """``distributed_type: XLA`` on this host: ``python -m accel_tpu.spawn`` (``xmp.spawn``)."""

    name = "xla"
    priority = 50

    def claims(self, config: dict[str, Any]) -> bool:
        """XLA jobs that are not pod-wide."""
        return _is_xla(config) and not config.get("tpu_use_cluster")

    def command(self, config: dict[str, Any], script: list[str]) -> list[str]:
        """``python -m accel_tpu.spawn --main_training_function F [--module] script args``."""
        check_xla_config(config)
        argv = [
            sys.executable,
            "-m",
            "accel_tpu.spawn",
            "--main_training_function",
            str(config.get("main_training_function") or "main"),
            "--num_processes",
            str(int(config.get("num_processes") or 1)),
        ]
        if config.get("module"):
            argv.append("--module")
        return argv + list(script)

    def environment(self, config: dict[str, Any]) -> dict[str, str]:
        """bf16 downcasting, ``tpu_env`` and (on PJRT CPU) the number of devices."""
        return xla_environment(config)

    def claims_notebook(self) -> bool:
        """In a notebook next to an XLA device (or ``ACCEL_DISTRIBUTED_TYPE=XLA``), unless CPU is forced."""
        from .runtime import xla_available

        if environment.get_bool(environment.USE_CPU) or not xla_available():
            return False
        requested = str(environment.get_str(environment.DISTRIBUTED_TYPE) or "").upper()
        return requested in XLA_TYPES or any(os.environ.get(name) for name in TPU_HINTS)

    def notebook_launch(
        self, function: Any, args: tuple, num_processes: int | None, mixed_precision: str
    ) -> Any:
        """Run ``function(*args)`` on the XLA devices from a notebook (forked ``xmp.spawn``)."""
        from .notebook import notebook_launch

        return notebook_launch(function, args, num_processes, mixed_precision)


class TPUPodLauncher(Launcher):
    """``tpu_use_cluster: true``: run ``accel launch --tpu`` on every worker of the pod over gcloud ssh.

    The script and its files must be at the same path on every worker (as with a shared disk).
    """

    name = "tpu_pod"
    priority = 60

    def claims(self, config: dict[str, Any]) -> bool:
        """XLA jobs with ``tpu_use_cluster``."""
        return _is_xla(config) and bool(config.get("tpu_use_cluster"))

    def command(self, config: dict[str, Any], script: list[str]) -> list[str]:
        """``gcloud compute tpus tpu-vm ssh NAME --zone Z --command "cd DIR; accel launch --tpu ..." --worker all``."""
        check_xla_config(config)
        name = pod.check_tpu_name(config.get("tpu_name"))
        zone = pod.check_tpu_zone(config.get("tpu_zone"))
        launch = [
            "accel",
            "launch",
            "--tpu",
            "--no_tpu_cluster",
            "--num_processes",
            str(int(config.get("num_processes") or 1)),
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
            env=pod.check_env_entries(config.get("tpu_env")),
            use_sudo=bool(config.get("tpu_use_sudo")),
        )
        return pod.gcloud_ssh(name, zone, remote)


__all__ = ["TPUPodLauncher", "XLALauncher", "check_xla_config", "xla_environment"]
