"""The ``slurm_config`` section, declared once: validation, ``--slurm_mode`` and its reader."""

from __future__ import annotations

from accel.config.options import Option, Section

MODES = ("auto", "node", "task", "off")
"""Values of ``slurm_config.slurm_mode``."""

SLURM_SECTION = Section(
    "slurm_config",
    [
        Option(
            "slurm_mode",
            default="auto",
            choices=MODES,
            help="inside srun: one task per node running torchrun (node), one task per process "
            "(task), by the task count (auto, the default) or never (off)",
            metavar="{auto,node,task,off}",
        ),
    ],
    title="SLURM",
)
"""The ``slurm_config`` section: ``slurm_mode`` and its ``accel launch`` flag."""

validate_section = SLURM_SECTION.validate
"""Problems of a ``slurm_config`` mapping (empty when it is valid)."""

__all__ = ["MODES", "SLURM_SECTION", "validate_section"]
