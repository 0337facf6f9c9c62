"""The ``parallelism_config`` section: N-D layout keys, ``--parallelism_config_*`` flags, launch checks.

Torch-free. The keys are Accelerate's (``parallelism_config_tp_size``, ...); ``accel launch``
checks the layout against ``num_processes`` (a mismatch exits 2 with one line) and hands it
to the workers as ``ACCEL_USE_PARALLELISM_CONFIG`` + ``PARALLELISM_CONFIG_*``, which
:class:`accel.ParallelismConfig` reads.
"""

from __future__ import annotations

from typing import Any

from accel.config.options import Section
from accel.errors import ConfigError
from accel.parallelism_config import (
    KEY_PREFIX,
    OPTIONS,
    DeepSpeedSequenceParallelConfig,
    ParallelismConfig,
    TorchContextParallelConfig,
)

PREFIX = KEY_PREFIX
"""Every key of the section starts with it (as in Accelerate's config files)."""


def _check_layout(values: dict[str, Any]) -> None:
    config_from_section(values)  # the dataclass's own rules (CP with SP, TP with pure replication)


PARALLELISM_SECTION = Section(
    "parallelism_config",
    OPTIONS,
    title="N-D parallelism",
    checks=(_check_layout,),
)
"""The ``parallelism_config`` section (flags ``--parallelism_config_*``), over core's
declarations (:data:`accel.parallelism_config.OPTIONS`), which also read the workers' variables."""


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
    from accel import env_vars

    env = {env_vars.USE_PARALLELISM_CONFIG: "true"}
    for name, value in values.items():
        variable = PARALLELISM_SECTION[name].env
        if value is not None and variable:
            env[variable] = str(value)
    return env
