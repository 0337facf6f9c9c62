"""Accelerate's launch helpers that take parsed ``accelerate launch`` arguments.

:func:`prepare_multi_gpu_env` is ``accelerate.utils.prepare_multi_gpu_env``: the environment
of a multi-GPU torchrun launch for an ``argparse.Namespace`` of launch arguments (from
``accel launch``'s parser, the compat ``accelerate launch`` parser, or built by hand). It is
not a second launcher: the arguments become settings (:func:`settings_from_arguments`), which
are resolved and planned like ``accel launch``'s (:func:`accel.launchers.plan_launch` with
the ``torchrun`` launcher); the plan's environment is what the workers get. Torch-free.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from accel import catalog

if TYPE_CHECKING:
    from .base import LaunchPlan

SELECTORS: dict[str, str] = catalog.STRATEGY_FLAGS
"""Launch arguments that choose the distributed type (``--use_fsdp`` means ``FSDP``)."""


def settings_from_arguments(args: argparse.Namespace | Mapping[str, object]) -> dict[str, object]:
    """The settings given in launch arguments ``args`` (a Namespace or a mapping), by name.

    Core settings keep their name, ``dynamo_*`` go to ``dynamo_config.*``, keys of a plugin's
    config section (``fsdp_sharding_strategy``) to ``<section>.<key>``; ``use_fsdp`` /
    ``use_deepspeed`` / ``use_megatron_lm`` set ``distributed_type``. Arguments that are
    None, and names no setting has (``training_script``, ...), are left out.
    """
    from accel.config.core_options import DYNAMO_KEYS, KEYS
    from accel.config.registered import registered_sections

    given = dict(args) if isinstance(args, Mapping) else dict(vars(args))
    sections = registered_sections()
    settings: dict[str, object] = {}
    for name, value in given.items():
        if value is None:
            continue
        if name in SELECTORS:
            if value:
                settings["distributed_type"] = SELECTORS[name]
        elif name in DYNAMO_KEYS:
            settings[f"dynamo_config.{name}"] = value
        elif "." in name:  # a section's flag as accel launch's parser names it
            settings[name] = value
        elif name in KEYS and KEYS[name].kind != "section":
            settings[name] = value
        else:
            for section in sections.values():
                option = section.get(name)
                if option is not None:
                    settings[f"{section.key}.{option.name}"] = value
                    break
    return settings


def free_port() -> int:
    """A TCP port free on this machine now (the system picks it)."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("", 0))
        return sock.getsockname()[1]


def _set_torchrun_arguments(args: Any, plan: LaunchPlan) -> None:  # Any: a duck Namespace
    """The attributes of ``args`` Accelerate's torchrun call reads: processes and endpoint.

    One machine: ``nproc_per_node`` and ``master_port``; several: also ``nnodes`` and
    ``node_rank``, with ``master_addr`` / ``master_port`` on one network (``same_network``),
    else ``rdzv_endpoint``. Ports and counts are strings, as torchrun's parser makes them.
    """
    args.nproc_per_node = str(plan.nproc_per_node)
    port = getattr(args, "main_process_port", None)
    if plan.num_machines > 1:
        args.nnodes = str(plan.num_machines)
        args.node_rank = plan.machine_rank
        address = getattr(args, "main_process_ip", None)
        if getattr(args, "same_network", False):
            args.master_addr = str(address)
            args.master_port = str(port)
        else:
            args.rdzv_endpoint = f"{address}:{port}"
    elif port is not None:
        args.master_port = str(port)


def prepare_multi_gpu_env(args: argparse.Namespace | Mapping[str, object]) -> dict[str, str]:
    """The environment of a multi-GPU torchrun launch for launch arguments ``args``.

    As Accelerate's: a copy of ``os.environ`` plus every variable the workers need
    (``ACCEL_*`` and ``ACCELERATE_*``, ``CUDA_VISIBLE_DEVICES`` for ``gpu_ids``, the plugins'
    own, such as ``ACCELERATE_USE_FSDP``), taken from the plan ``accel launch`` would run.
    The arguments alone decide the settings (no config file, no ``ACCEL_*`` variables are
    read); the distributed type is ``MULTI_GPU`` unless ``use_fsdp`` / ``use_deepspeed`` /
    ``use_megatron_lm`` or ``distributed_type`` say otherwise. Also sets
    ``args.nproc_per_node`` (and ``nnodes`` / ``node_rank`` with several machines), as
    Accelerate does for its torchrun call, and its endpoint (``master_port``; ``master_addr`` or
    ``rdzv_endpoint`` with several machines). ``main_process_port`` 0 means a free port, which is
    chosen and set on ``args``, as in Accelerate. ``--module`` with ``--no_python`` is a
    ValueError.
    """
    from accel.config.resolution import resolve

    from .planning import plan_launch

    if isinstance(args, Mapping):
        port = args.get("main_process_port")
    else:
        port = getattr(args, "main_process_port", None)
    if port is not None and str(port).strip() == "0":
        port = free_port()
        if isinstance(args, Mapping):
            args = {**args, "main_process_port": port}
        else:
            args.main_process_port = port
    module = bool(getattr(args, "module", False))
    no_python = bool(getattr(args, "no_python", False))
    if module and no_python:
        raise ValueError("--module and --no_python cannot be used together")
    settings = settings_from_arguments(args)
    if not settings.get("use_cpu"):
        settings.setdefault("distributed_type", "MULTI_GPU")
    resolved = resolve(flags=settings, use_config_file=False, environ={})
    script = [
        str(getattr(args, "training_script", None) or "train.py"),
        *map(str, getattr(args, "training_script_args", None) or []),
    ]
    plan = plan_launch(resolved.values, script, "torchrun", module=module, no_python=no_python)
    try:
        _set_torchrun_arguments(args, plan)
    except AttributeError:  # a mapping or a frozen object: the environment is the result
        pass
    env = dict(os.environ)
    env.update(plan.environment)
    return env


__all__ = ["SELECTORS", "free_port", "prepare_multi_gpu_env", "settings_from_arguments"]
