"""From resolved settings to a :class:`~accel.launchers.LaunchPlan`: the environment, the launcher.

:func:`plan_launch` is what ``accel launch`` (or any other front end) calls once the
settings are resolved: it computes the variables every worker gets
(:func:`worker_environment`: the ``ACCEL_*`` settings plus each plugin's
``accel_launch_environment``), picks the launcher (:func:`choose_launcher`) and asks it
for its plan. Torch-free.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..errors import UsageError
from .base import Launcher, LaunchPlan


def _flag(value: object) -> str:
    return "true" if value else "false"


def settings_environment(config: Mapping[str, Any]) -> dict[str, str]:
    """The ``ACCEL_*`` (and device) variables for the resolved settings ``config``.

    ``ACCEL_LAUNCH_CONFIG`` carries every setting that is not None, as JSON (read back by
    :func:`accel.config.launched.launched_config`).
    """
    from .. import env_vars as E

    v = config
    env = {
        E.MIXED_PRECISION: str(v.get("mixed_precision") or "no"),
        E.USE_CPU: _flag(v.get("use_cpu")),
        E.DEBUG_MODE: _flag(v.get("debug")),
        E.DISTRIBUTED_TYPE: str(v.get("distributed_type") or "NO"),
        E.DOWNCAST_BF16: str(v.get("downcast_bf16") or "no"),
        E.CPU_AFFINITY: _flag(v.get("enable_cpu_affinity")),
        E.LAUNCH_CONFIG: json.dumps(
            {k: value for k, value in v.items() if value is not None}, sort_keys=True, default=str
        ),
    }
    if v.get("gradient_accumulation_steps") is not None:
        env[E.GRADIENT_ACCUMULATION_STEPS] = str(v["gradient_accumulation_steps"])
    dynamo = v.get("dynamo_config") or {}
    if str(dynamo.get("dynamo_backend", "NO")).upper() != "NO":
        env[E.DYNAMO_BACKEND] = str(dynamo["dynamo_backend"])
        env[E.DYNAMO_MODE] = str(dynamo.get("dynamo_mode") or "default")
        env[E.DYNAMO_USE_FULLGRAPH] = _flag(dynamo.get("dynamo_use_fullgraph"))
        env[E.DYNAMO_USE_DYNAMIC] = _flag(dynamo.get("dynamo_use_dynamic"))
        env[E.DYNAMO_USE_REGIONAL_COMPILATION] = _flag(
            dynamo.get("dynamo_use_regional_compilation")
        )
    if v.get("gpu_ids") not in (None, "all") and not v.get("use_cpu"):
        env["CUDA_VISIBLE_DEVICES"] = str(v["gpu_ids"])
    if v.get("num_cpu_threads_per_process"):
        env["OMP_NUM_THREADS"] = str(v["num_cpu_threads_per_process"])
    return env


def plugin_environment(config: Mapping[str, object]) -> dict[str, str]:
    """The variables plugins return from ``accel_launch_environment`` for ``config``, merged.

    Applied in registration order, so on a name several plugins set, the last registered wins.
    """
    from ..plugins import get_plugin_manager

    env: dict[str, str] = {}
    for mapping in reversed(get_plugin_manager().hook.accel_launch_environment(config=config)):
        env.update({str(k): str(value) for k, value in (mapping or {}).items()})
    return env


def worker_environment(config: Mapping[str, object]) -> dict[str, str]:
    """What every worker gets, whatever the launcher: the settings, then the plugins' variables.

    Each ``ACCEL_*`` variable is also exported under Accelerate's spelling (``ACCELERATE_*``,
    ``ACCELERATE_USE_FSDP``, ...), which transformers' ``TrainingArguments`` reads.
    """
    from .. import env_vars as E
    from ..config.core_options import KEYS

    env = settings_environment(config)
    env.update(plugin_environment(config))
    return E.accelerate_names(env, KEYS["distributed_type"].from_env(env))


def choose_launcher(config: Mapping[str, object], name: str | None = None) -> Launcher:
    """The launcher for ``config``: ``name`` if given, else the highest-priority one claiming it.

    Raises :class:`~accel.errors.UsageError` naming the installed launchers when ``name``
    is unknown, or saying what to set or install when none claims the job.
    """
    from ..plugins import registry

    table = dict(registry.launchers())
    if name:
        if name not in table:
            raise UsageError(
                f"--launcher {name}: no such launcher; installed: {', '.join(sorted(table)) or 'none'}"
            )
        return table[name]()
    for cls in sorted(table.values(), key=lambda c: -getattr(c, "priority", 0)):
        launcher = cls()
        if launcher.claims(dict(config)):
            return launcher
    env_name = config.get("compute_environment")
    if env_name != "LOCAL_MACHINE":
        raise UsageError(
            f"compute_environment {env_name}: no installed launcher runs it (accel's own run "
            "LOCAL_MACHINE jobs); set compute_environment: LOCAL_MACHINE or install a launcher plugin"
        )
    raise UsageError(
        f"no installed launcher handles distributed_type {config.get('distributed_type')}; "
        "see `accel plugins`"
    )


def plan_launch(
    config: Mapping[str, object],
    script: list[str],
    launcher: str | Launcher | None = None,
    *,
    module: bool = False,
    no_python: bool = False,
) -> LaunchPlan:
    """The :class:`LaunchPlan` that runs ``script`` (target and arguments) under ``config``.

    ``config`` holds the resolved settings (:func:`accel.config.resolution.resolve`'s values);
    the workers' environment is computed from them alone. The launcher sees them plus
    ``module`` / ``no_python`` (how ``script[0]`` runs) and ``training_script`` /
    ``training_script_args``. ``launcher`` forces one (by name or as an object) instead of
    the highest-priority launcher that claims the job.
    """
    if not script:
        raise UsageError("the script to run is missing")
    settings = dict(config)
    environment = worker_environment(settings)
    settings.update(
        module=bool(module),
        no_python=bool(no_python),
        training_script=script[0],
        training_script_args=list(script[1:]),
    )
    chosen = launcher if isinstance(launcher, Launcher) else choose_launcher(settings, launcher)
    plan = chosen.plan(settings, list(script), environment)
    if not isinstance(plan, LaunchPlan):
        raise TypeError(
            f"launcher {chosen.name!r} returned {type(plan).__name__} from plan(), not a LaunchPlan"
        )
    return plan


__all__ = [
    "choose_launcher",
    "plan_launch",
    "plugin_environment",
    "settings_environment",
    "worker_environment",
]
