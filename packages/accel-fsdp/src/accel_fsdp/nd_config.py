"""The ``parallelism_config`` section: N-D layout keys, ``--parallelism_config_*`` flags, launch checks.

Torch-free. The keys are Accelerate's (``parallelism_config_tp_size``, ...); ``accel launch``
checks the layout against ``num_processes`` (a mismatch exits 2 with one line) and hands it
to the workers as ``ACCEL_USE_PARALLELISM_CONFIG`` + ``PARALLELISM_CONFIG_*``, which
:class:`accel.ParallelismConfig` reads.
"""

from __future__ import annotations

from typing import Any

from accel.config.sections import Option, Section
from accel.errors import ConfigError
from accel.parallelism_config import (
    CP_BACKENDS,
    CP_COMM_STRATEGIES,
    ENV_PREFIX,
    SP_BACKENDS,
    DeepSpeedSequenceParallelConfig,
    ParallelismConfig,
    TorchContextParallelConfig,
)

PREFIX = "parallelism_config_"
"""Every key of the section starts with it (as in Accelerate's config files)."""


def _size(name: str, what: str) -> Option:
    return Option(PREFIX + name, int, 1, minimum=1, help=what, metavar="N")


def _check_layout(values: dict[str, Any]) -> None:
    config_from_section(values)  # the dataclass's own rules (CP with SP, TP with pure replication)


PARALLELISM_SECTION = Section(
    "parallelism_config",
    [
        _size(
            "dp_replicate_size", "processes holding model replicas (HSDP with dp_shard_size > 1)"
        ),
        _size("dp_shard_size", "processes the parameters are sharded over (FSDP2)"),
        _size("tp_size", "processes each weight is split over (tensor parallelism)"),
        _size("cp_size", "processes each sequence is split over (context parallelism)"),
        Option(PREFIX + "cp_backend", default="torch", choices=CP_BACKENDS, help="torch"),
        Option(
            PREFIX + "cp_comm_strategy",
            default="allgather",
            choices=CP_COMM_STRATEGIES,
            help="allgather or alltoall (context parallelism)",
        ),
        _size("sp_size", "processes each sequence is split over (DeepSpeed ALST/Ulysses)"),
        Option(PREFIX + "sp_backend", default="deepspeed", choices=SP_BACKENDS, help="deepspeed"),
        Option(PREFIX + "sp_seq_length", int, minimum=1, help="sequence length of every batch"),
        Option(
            PREFIX + "sp_seq_length_is_variable",
            bool,
            True,
            help="sequences may change length between batches",
        ),
        Option(
            PREFIX + "sp_attn_implementation",
            help="flash_attention_2, flash_attention_3, sdpa or a hub flash-attn kernel",
        ),
    ],
    title="N-D parallelism",
    checks=(_check_layout,),
)
"""The ``parallelism_config`` section (flags ``--parallelism_config_*``)."""


def config_from_section(values: dict[str, Any]) -> ParallelismConfig:
    """A :class:`ParallelismConfig` from the section's typed values; ConfigError on a bad layout."""

    def get(name: str) -> Any:
        return values.get(PREFIX + name)

    def size(name: str) -> int:
        return get(name) or 1

    cp_handler = sp_handler = None
    if size("cp_size") > 1:
        cp_handler = TorchContextParallelConfig(cp_comm_strategy=get("cp_comm_strategy"))
    if size("sp_size") > 1:
        sp_handler = DeepSpeedSequenceParallelConfig(
            sp_seq_length=get("sp_seq_length"),
            sp_seq_length_is_variable=get("sp_seq_length_is_variable"),
            sp_attn_implementation=get("sp_attn_implementation"),
        )
    return ParallelismConfig(
        dp_replicate_size=size("dp_replicate_size"),
        dp_shard_size=size("dp_shard_size"),
        tp_size=size("tp_size"),
        cp_size=size("cp_size"),
        cp_backend=get("cp_backend") or "torch",
        sp_size=size("sp_size"),
        sp_backend=get("sp_backend") or "deepspeed",
        cp_handler=cp_handler,
        sp_handler=sp_handler,
    )


def launch_environment(config: dict[str, Any]) -> dict[str, str]:
    """The workers' variables for a launch using the section (or ``--use_parallelism_config``).

    Checks the layout against the launch's ``num_processes`` first: the error names the sizes.
    """
    section = config.get("parallelism_config") or {}
    if not section and not config.get("use_parallelism_config"):
        return {}
    values = PARALLELISM_SECTION.read(section)
    layout = config_from_section(values)
    processes = int(config.get("num_processes") or 1)
    try:
        layout.validate_world(processes, str(config.get("distributed_type") or ""))
    except ConfigError as error:
        raise ConfigError(f"parallelism_config: {error}") from None
    from accel import environment

    env = {environment.USE_PARALLELISM_CONFIG: "true"}
    for name, value in values.items():
        if value is not None:
            env[ENV_PREFIX + name.removeprefix(PREFIX).upper()] = str(value)
    return env
