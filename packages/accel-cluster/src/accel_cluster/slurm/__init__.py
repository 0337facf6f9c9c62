"""SLURM launcher of accel-cluster: one ``srun accel launch`` for every node of an allocation."""

from .nodelist import expand_nodelist

__all__ = ["expand_nodelist"]
