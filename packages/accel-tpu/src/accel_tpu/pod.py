"""Commands for TPU pods: the ``gcloud compute tpus tpu-vm ssh`` argv and what it runs.

Everything is built as argv lists. The one string that a pod worker's shell runs
(``--command``) is assembled from shell-quoted parts.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Sequence
from pathlib import Path

from accel.errors import ConfigError

TPU_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
"""Google Cloud resource names: lowercase letters, digits and hyphens, starting with a letter."""
TPU_ZONE = re.compile(r"^[a-z]+(-[a-z]+[0-9]+)+-[a-z]$")
"""Zones such as ``us-central2-b`` or ``europe-west4-a``."""
ENV_ENTRY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
"""``NAME=value`` entries of ``tpu_env``."""
POD_WORKDIR = "/usr/share"
"""Where ``accel tpu-config`` runs its commands on each worker (Accelerate's choice)."""


def check_tpu_name(name: str | None, flag: str = "--tpu_name") -> str:
    """``name`` when it is a valid TPU name, else a ConfigError saying how to set it."""
    if not name:
        raise ConfigError(
            f"tpu_name is not set: pass {flag} NAME or set tpu_name in the config file (accel config)"
        )
    if not TPU_NAME.match(name):
        raise ConfigError(
            f"tpu_name {name!r} is not a TPU name: lowercase letters, digits and hyphens, "
            "starting with a letter (see `gcloud compute tpus tpu-vm list`)"
        )
    return name


def check_tpu_zone(zone: str | None, flag: str = "--tpu_zone") -> str:
    """``zone`` when it looks like a Google Cloud zone, else a ConfigError."""
    if not zone:
        raise ConfigError(
            f"tpu_zone is not set: pass {flag} ZONE (such as us-central2-b) or set tpu_zone "
            "in the config file (accel config)"
        )
    if not TPU_ZONE.match(zone):
        raise ConfigError(
            f"tpu_zone {zone!r} is not a Google Cloud zone such as us-central2-b or europe-west4-a"
        )
    return zone


def check_env_entries(entries: Iterable[str] | None, key: str = "tpu_env") -> list[str]:
    """``NAME=value`` entries, or a ConfigError naming the bad one."""
    result = []
    for entry in entries or []:
        if not isinstance(entry, str) or not ENV_ENTRY.match(entry):
            raise ConfigError(
                f"{key} entry {entry!r} is not NAME=value (for example XLA_USE_BF16=1)"
            )
        result.append(entry)
    return result


def install_spec(version: str) -> str:
    """The ``pip install`` arguments for ``--accel_version``: ``latest``, a version, or a requirement."""
    from packaging.version import InvalidVersion, Version

    if version == "latest":
        return "-U accel-tpu"
    try:
        return f"accel-tpu=={Version(version)}"
    except InvalidVersion:
        if version.strip() and not version.startswith("-"):
            return shlex.quote(version)
        raise ConfigError(
            f"--accel_version {version!r}: use latest, a version such as 0.1.0, or a pip requirement"
        ) from None


def read_command_file(path: str | Path) -> list[str]:
    """The non-empty lines of ``path`` (``command_file``), or a ConfigError when unreadable."""
    try:
        text = Path(path).expanduser().read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"command_file {path}: cannot read it ({exc.strerror})") from None
    return [line for line in text.splitlines() if line.strip()]


def setup_commands(
    commands: Sequence[str] | None,
    command_file: str | None = None,
    install_accel: bool = False,
    accel_version: str = "latest",
) -> list[str]:
    """The lines ``accel tpu-config`` runs on each worker, in order.

    From ``command_file`` when given, else ``commands``; preceded by ``cd /usr/share`` and,
    with ``install_accel``, a ``pip install`` of accel-tpu.
    """
    lines = read_command_file(command_file) if command_file else list(commands or [])
    if not lines:
        raise ConfigError(
            "nothing to run on the pod: pass --command CMD (repeatable) or --command_file FILE, "
            "or set commands / command_file in the config file"
        )
    prefix = [f"cd {POD_WORKDIR}"]
    if install_accel:
        prefix.append(f"pip install {install_spec(accel_version)}")
    return prefix + lines


def gcloud_ssh(
    tpu_name: str | None,
    tpu_zone: str | None,
    remote_command: str,
    use_alpha: bool = False,
    worker: str = "all",
) -> list[str]:
    """``gcloud [alpha] compute tpus tpu-vm ssh NAME --zone ZONE --command CMD --worker all``."""
    argv = ["gcloud", *(["alpha"] if use_alpha else [])]
    return argv + [
        "compute",
        "tpus",
        "tpu-vm",
        "ssh",
        check_tpu_name(tpu_name),
        "--zone",
        check_tpu_zone(tpu_zone),
        "--command",
        remote_command,
        "--worker",
        worker,
    ]


def remote_launch(
    launch_argv: Sequence[str],
    workdir: str,
    env: Sequence[str] = (),
    use_sudo: bool = False,
) -> str:
    """The shell line a pod worker runs for ``accel launch``: ``cd DIR; [sudo] [env K=V...] accel launch ...``."""
    parts = (["sudo"] if use_sudo else []) + (["env", *env] if env else []) + list(launch_argv)
    return f"cd {shlex.quote(workdir)}; {shlex.join(parts)}"
