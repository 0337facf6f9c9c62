"""The DeepSpeed multi-node launcher: argv for DeepSpeed's runner (pdsh, openmpi, mvapich, mpich, slurm, nossh).

It claims ``distributed_type: DEEPSPEED`` jobs on several machines unless
``deepspeed_multinode_launcher`` is ``standard`` (then torchrun, from accel-cli,
runs it on each machine). It only builds an argv list; nothing goes through a shell.
Torch-free.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from accel.errors import ConfigError
from accel.launchers import Launcher

from .config import MULTINODE_LAUNCHERS

RUNNER_MODULE = "accel_deepspeed.runner"


def _section(config: Mapping[str, Any]) -> Mapping[str, object]:
    section = config.get("deepspeed_config") or {}
    return section if isinstance(section, dict) else {}


class DeepSpeedMultinodeLauncher(Launcher):
    """Several machines through DeepSpeed's runner (``deepspeed --hostfile ... --launcher pdsh script``).

    ``config`` is the launch configuration (core's :class:`~accel.launchers.Launcher` contract):
    settings by name, each of its declared type.
    """

    name = "deepspeed"
    priority = 50

    def claims(self, config: Mapping[str, Any]) -> bool:
        """DeepSpeed on more than one machine with a launcher other than ``standard``."""
        return (
            str(config.get("distributed_type")) == "DEEPSPEED"
            and int(config.get("num_machines") or 1) > 1
            and self.launcher_name(config) != "standard"
        )

    @staticmethod
    def launcher_name(config: Mapping[str, Any]) -> str:
        """``deepspeed_multinode_launcher`` (default ``pdsh``), checked."""
        name = str(_section(config).get("deepspeed_multinode_launcher") or "pdsh")
        if name not in MULTINODE_LAUNCHERS:
            raise ConfigError(
                f"deepspeed_multinode_launcher={name!r} is not a launcher: use one of {', '.join(MULTINODE_LAUNCHERS)}"
            )
        return name

    def command(self, config: Mapping[str, Any], script: list[str]) -> list[str]:
        """The argv of DeepSpeed's runner for ``config`` and ``script``."""
        section = _section(config)
        launcher = self.launcher_name(config)
        machines = int(config.get("num_machines") or 1)
        argv = [sys.executable, "-m", RUNNER_MODULE]
        if section.get("deepspeed_hostfile"):
            argv += ["--hostfile", str(section["deepspeed_hostfile"])]
        if launcher == "nossh":
            argv += ["--node_rank", str(config.get("machine_rank") or 0), "--no_ssh"]
        else:
            argv += ["--launcher", launcher]
        if section.get("deepspeed_exclusion_filter"):
            argv += ["--exclude", str(section["deepspeed_exclusion_filter"])]
        elif section.get("deepspeed_inclusion_filter"):
            argv += ["--include", str(section["deepspeed_inclusion_filter"])]
        else:
            total = int(config.get("num_processes") or machines)
            argv += ["--num_gpus", str(int(config.get("nproc_per_node") or total // machines))]
        if config.get("main_process_ip"):
            argv += ["--master_addr", str(config["main_process_ip"])]
        argv += ["--master_port", str(config.get("main_process_port") or 29500)]
        if config.get("module") and config.get("no_python"):
            raise ConfigError("--module and --no_python cannot be used together: choose one")
        if config.get("module"):
            argv.append("--module")
        elif config.get("no_python"):
            argv.append("--no_python")
        return [*argv, *script]


__all__ = ["DeepSpeedMultinodeLauncher", "RUNNER_MODULE"]
