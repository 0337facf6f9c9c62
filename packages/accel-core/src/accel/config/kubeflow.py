"""Settings from the environment Kubeflow gives each training pod (PyTorchJob, TrainJob).

Kubeflow's training operator (``PyTorchJob``) and Kubeflow Trainer (``TrainJob`` with a
torch runtime) describe the job to every pod in environment variables, the ``PET_*``
ones being the defaults of ``torchrun``'s flags. :func:`read_job` turns them into
``accel launch`` settings, each with the variable it came from:

* ``PET_NNODES`` (``N``, or ``MIN:MAX`` for an elastic job) -> ``num_machines``
  (and ``max_num_machines``); without it (operators before v1.7) ``WORLD_SIZE``, which
  then counts pods, each running one process.
* ``PET_NODE_RANK`` -> ``machine_rank``; else ``RANK`` (the pod's rank, before v1.7),
  else ``JOB_COMPLETION_INDEX`` (an indexed Job's pod). An elastic job has none: the
  c10d rendezvous numbers the machines.
* ``PET_RDZV_ENDPOINT`` with ``PET_RDZV_BACKEND`` (elastic), else ``PET_MASTER_ADDR`` /
  ``PET_MASTER_PORT``, else ``MASTER_ADDR`` / ``MASTER_PORT`` -> ``main_process_ip`` /
  ``main_process_port``; ``PET_RDZV_ID`` / ``PET_RDZV_CONF`` -> ``rdzv_id`` / ``rdzv_conf``.
* ``PET_NPROC_PER_NODE`` (``PET_N_PROC_PER_NODE`` from an elastic job of older operators,
  whose API was ``pytorch/v1``) -> ``nproc_per_node``: a number, or ``auto`` (one process
  per accelerator, one on a CPU-only pod), ``gpu`` (one per GPU), ``cpu`` (one per CPU
  core, as torchrun counts them).
* ``PET_MAX_RESTARTS`` -> ``max_restarts``.
* ``PET_STANDALONE`` (an ``elasticPolicy`` with ``standalone: true``; the operator sets it
  empty, which torchrun cannot parse) -> ``num_machines`` 1: every pod trains alone, as
  torchrun's ``--standalone``; the variable is kept from the agent
  (:data:`AGENT_DROPPED_VARIABLES`).

An elastic job (``elasticPolicy``) is read like a static one: ``PET_NNODES=MIN:MAX``, the
c10d endpoint, ``PET_MAX_RESTARTS`` and the rest become ``accel launch``'s
``--nnodes MIN:MAX --rdzv_backend c10d --rdzv_endpoint HOST:PORT --max_restarts N``.

Inside a torchrun worker (``TORCHELASTIC_RUN_ID`` set) ``RANK`` and ``WORLD_SIZE`` count
processes, not pods: nothing is read there. Torch-free unless ``PET_NPROC_PER_NODE`` asks
to count the accelerators.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from accel.catalog import RDZV_BACKENDS
from accel.errors import ConfigError

MACHINE_KEYS = (
    "machine_rank",
    "main_process_ip",
    "main_process_port",
    "rdzv_backend",
    "rdzv_id",
    "rdzv_conf",
    "max_num_machines",
)
"""Settings that only mean something with several machines: dropped when a higher layer
says the job runs on one machine (``--num_machines 1`` in a pod: this pod runs alone)."""

JOB_KEYS = (
    "num_machines",
    "max_num_machines",
    "nproc_per_node",
    "max_restarts",
    *MACHINE_KEYS,
)
"""Every setting :func:`read_job` may give."""

POD_PROCESS_VARIABLES = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
"""torch.distributed variables the operator sets for the pod: a process that runs the
script directly (one process, no torchrun to replace them) must not see them."""

AGENT_DROPPED_VARIABLES = ("PET_STANDALONE",)
"""Pod variables ``accel launch`` reads and keeps from the torchrun agent, which would parse
them itself and fail (``PET_STANDALONE=""``)."""

NPROC_VARIABLES = ("PET_NPROC_PER_NODE", "PET_N_PROC_PER_NODE")
"""Processes per pod: the current name, then the one older operators' elastic jobs had."""

ELASTIC_PORT = 29400
"""torchrun's port when ``PET_RDZV_ENDPOINT`` names a host without one."""


@dataclass(frozen=True)
class JobEnvironment:
    """What the pod's environment says about the job: settings and their variables."""

    settings: dict[str, Any] = field(default_factory=dict)
    """Setting name -> value (typed as ``accel launch`` settings)."""
    origins: dict[str, str] = field(default_factory=dict)
    """Setting name -> the variable it came from (``PET_NNODES``, ``PET_NPROC_PER_NODE=auto``)."""


def in_pod_of_job(environ: Mapping[str, str]) -> bool:
    """Whether ``environ`` looks like a Kubeflow training pod seen from outside torchrun.

    ``PET_NNODES`` says so; without it (operators before v1.7) ``MASTER_ADDR``,
    ``WORLD_SIZE`` and ``RANK`` do, in a Kubernetes pod (``KUBERNETES_SERVICE_HOST``) only:
    elsewhere a script may export those three for its own launcher.
    """
    if environ.get("TORCHELASTIC_RUN_ID"):
        return False  # a torchrun worker: RANK / WORLD_SIZE are per process
    if environ.get("PET_NNODES"):
        return True
    names = ("KUBERNETES_SERVICE_HOST", "MASTER_ADDR", "WORLD_SIZE", "RANK")
    return all(environ.get(name) for name in names)


MAX_PORT = 65535


def _number(
    environ: Mapping[str, str], name: str, minimum: int = 0, maximum: int | None = None
) -> int:
    value = environ[name]
    try:
        number = int(value.strip())
    except ValueError:
        number = -1
    if number < minimum or (maximum is not None and number > maximum):
        span = f">= {minimum}" if maximum is None else f"from {minimum} to {maximum}"
        raise ConfigError(
            f"{name}={value!r}: expected a whole number {span} (set by the Kubeflow "
            "training operator); fix the pod's environment or pass the setting as a flag"
        )
    return number


def _machines(environ: Mapping[str, str]) -> tuple[int, int | None]:
    """``(num_machines, max_num_machines or None)`` from ``PET_NNODES`` (``N`` or ``MIN:MAX``)."""
    value = environ["PET_NNODES"]
    low, colon, high = value.partition(":")
    try:
        minimum, maximum = int(low), int(high) if colon else None
    except ValueError:
        minimum, maximum = 0, None
    if minimum < 1 or (maximum is not None and maximum < minimum):
        raise ConfigError(
            f"PET_NNODES={value!r}: expected a number of machines or MIN:MAX with "
            "1 <= MIN <= MAX; fix the pod's environment or pass --num_machines"
        )
    return minimum, maximum


def _endpoint(value: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port``, or a bare host on torchrun's 29400) as ``(host, port)``."""
    host, port = value, ""
    if value.startswith("["):
        host, _, rest = value[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    elif value.count(":") == 1:
        host, _, port = value.partition(":")
    if not host or (port and not (port.isdigit() and 1 <= int(port) <= MAX_PORT)):
        raise ConfigError(
            f"PET_RDZV_ENDPOINT={value!r}: expected HOST:PORT; fix the pod's environment "
            "or pass --main_process_ip and --main_process_port"
        )
    return host, int(port) if port else ELASTIC_PORT


def standalone(environ: Mapping[str, str]) -> bool:
    """Whether the pod's ``PET_STANDALONE`` asks for torchrun's ``--standalone`` (set, not 0)."""
    value = environ.get("PET_STANDALONE")
    return value is not None and value.strip().lower() not in ("0", "false", "no")


def processes_per_pod(
    value: str, use_cpu: bool = False, name: str = "PET_NPROC_PER_NODE"
) -> tuple[int, str]:
    """``PET_NPROC_PER_NODE`` (the variable ``name``) as a number of processes, and how it was counted.

    A number is itself; ``auto`` is one process per accelerator, as torchrun's, but one on a
    CPU-only pod or with ``use_cpu`` (torchrun would start one per core; the operator's
    ``WORLD_SIZE`` counts such a pod as one process); ``gpu`` one per GPU; ``cpu`` one
    per core this process may use, as torchrun counts them.
    """
    text = value.strip().lower()
    if text.isdigit() and int(text) >= 1:
        return int(text), ""
    if text == "cpu":
        # the cores this process may use, as torchrun counts them (cgroups, taskset)
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
        cores = cores or os.cpu_count() or 1
        return cores, f"{cores} CPU core{'s' if cores > 1 else ''}"
    if text in ("auto", "gpu"):
        from accel import devices  # imports torch: only for these two values

        kind = None if use_cpu else devices.available_kind()
        count = devices.device_count(kind) if kind else 0
        if count:
            return count, f"{count} {kind} device{'s' if count > 1 else ''}"
        if text == "gpu":
            raise ConfigError(
                f"{name}=gpu but this pod sees no GPU: request GPUs in the pod's "
                "resources, or set nprocPerNode to a number"
            )
        return 1, "no accelerator" if not use_cpu else "use_cpu"
    raise ConfigError(
        f"{name}={value!r}: expected a number >= 1, auto, gpu or cpu; fix "
        "nprocPerNode in the job's manifest or pass --nproc_per_node"
    )


def read_job(
    environ: Mapping[str, str], use_cpu: bool = False, replaced: Collection[str] = ()
) -> JobEnvironment | None:
    """The settings the Kubeflow pod environment ``environ`` gives, or None outside such a pod.

    ``use_cpu`` (from the other layers) makes ``PET_NPROC_PER_NODE=auto`` count no GPU.
    Settings in ``replaced`` (a flag or ``ACCEL_*`` variable gives them) are not read, so
    a bad variable behind them is no error. ConfigError names the variable whose value
    cannot be read, or those missing for a job of several machines.
    """
    if not in_pod_of_job(environ):
        return None
    job = JobEnvironment()
    values, origins = job.settings, job.origins

    def put(name: str, value: Any, origin: str) -> None:
        if name not in replaced:
            values[name] = value
            origins[name] = origin

    if standalone(environ):  # every pod alone, with a rendezvous of its own
        put("num_machines", 1, "PET_STANDALONE")
    else:
        _machine_settings(environ, bool(environ.get("PET_NNODES")), replaced, put, values)
    nproc = next((name for name in NPROC_VARIABLES if environ.get(name)), None)
    if nproc is not None and "nproc_per_node" not in replaced:
        raw = environ[nproc]
        count, how = processes_per_pod(raw, use_cpu, nproc)
        origin = nproc + (f"={raw} ({how})" if how else "")
        put("nproc_per_node", count, origin)
    if environ.get("PET_MAX_RESTARTS") and "max_restarts" not in replaced:
        put("max_restarts", _number(environ, "PET_MAX_RESTARTS"), "PET_MAX_RESTARTS")
    return job


def _machine_settings(
    environ: Mapping[str, str],
    pet: bool,
    replaced: Collection[str],
    put: Any,
    values: Mapping[str, Any],
) -> tuple[int, int | None]:
    """Machines, rank and meeting point (static or rendezvous) from the pod's variables;
    ``put(name, value, origin)`` records each into ``values``; returns the machines
    (``MIN`` of an elastic range) and the elastic ``MAX`` or None."""
    machines, elastic_max = 1, None
    if pet and "num_machines" not in replaced:
        machines, elastic_max = _machines(environ)
        put("num_machines", machines, "PET_NNODES")
        if elastic_max is not None and elastic_max != machines:
            put("max_num_machines", elastic_max, "PET_NNODES")
    elif not pet:  # operators before v1.7: WORLD_SIZE counts pods, one process each
        if "num_machines" not in replaced:
            machines = _number(environ, "WORLD_SIZE", minimum=1)
            put("num_machines", machines, "WORLD_SIZE")
        put("nproc_per_node", 1, "WORLD_SIZE")
    backend = environ.get("PET_RDZV_BACKEND")
    rendezvous = bool(backend and environ.get("PET_RDZV_ENDPOINT"))
    for name in ("PET_NODE_RANK", "RANK", "JOB_COMPLETION_INDEX"):
        if environ.get(name) and (name != "RANK" or not pet):
            if "machine_rank" not in replaced:
                put("machine_rank", _number(environ, name), name)
            break
    else:  # a static job of several machines needs this pod's rank; a rendezvous numbers them
        needs_rank = machines > 1 and elastic_max is None and backend in (None, "static")
        if needs_rank and "machine_rank" not in replaced:
            raise ConfigError(
                f"a job of {machines} machines, but no PET_NODE_RANK, RANK or "
                "JOB_COMPLETION_INDEX says which one this pod is: fix the pod's environment "
                "or pass --machine_rank"
            )
    if rendezvous:
        if "rdzv_backend" not in replaced and backend not in RDZV_BACKENDS:
            raise ConfigError(
                f"PET_RDZV_BACKEND={backend!r}: accel launch supports "
                f"{', '.join(RDZV_BACKENDS[:-1])} and {RDZV_BACKENDS[-1]}; set rdzvBackend in "
                "the elasticPolicy or pass --rdzv_backend"
            )
        put("rdzv_backend", backend, "PET_RDZV_BACKEND")
        if not {"main_process_ip", "main_process_port"} <= set(replaced):
            host, port = _endpoint(environ["PET_RDZV_ENDPOINT"])
            put("main_process_ip", host, "PET_RDZV_ENDPOINT")
            put("main_process_port", port, "PET_RDZV_ENDPOINT")
        for key, name in (("rdzv_id", "PET_RDZV_ID"), ("rdzv_conf", "PET_RDZV_CONF")):
            if environ.get(name):
                put(key, environ[name], name)
    else:
        for key, names in (
            ("main_process_ip", ("PET_MASTER_ADDR", "MASTER_ADDR")),
            ("main_process_port", ("PET_MASTER_PORT", "MASTER_PORT")),
        ):
            name = next((n for n in names if environ.get(n)), None)
            if name is not None and key not in replaced:
                port = key == "main_process_port"
                value = _number(environ, name, 1, MAX_PORT) if port else environ[name]
                put(key, value, name)
    several = max(machines, elastic_max or 1) > 1
    if several and "main_process_ip" not in values and "main_process_ip" not in replaced:
        raise ConfigError(
            "a job of several machines, but no PET_RDZV_ENDPOINT, PET_MASTER_ADDR or "
            "MASTER_ADDR says where they meet: fix the pod's environment or pass "
            "--main_process_ip"
        )
    return machines, elastic_max


__all__ = [
    "AGENT_DROPPED_VARIABLES",
    "ELASTIC_PORT",
    "JOB_KEYS",
    "MACHINE_KEYS",
    "MAX_PORT",
    "NPROC_VARIABLES",
    "POD_PROCESS_VARIABLES",
    "JobEnvironment",
    "in_pod_of_job",
    "processes_per_pod",
    "read_job",
    "standalone",
]
