"""A training strategy owned by a plugin: its ``--use_X`` flag, its section's flags, its question.

FSDP, DeepSpeed and Megatron-LM each choose a distributed type the same way: ``accel launch``
gets ``--use_<name>`` plus one flag per key of the plugin's :class:`~accel.config.options.Section`,
and ``accel config`` asks "Do you want to use ...?" unless another strategy was already chosen.
A plugin declares that once::

    FSDP = Strategy(FSDP_SECTION, "use_fsdp", help="train with FSDP", question="Use FSDP?")

    @hookimpl
    def accel_launch_arguments(parser):
        FSDP.add_arguments(parser)             # --use_fsdp and the --fsdp_* flags

    @hookimpl
    def accel_config_questions(ask, config):
        if FSDP.chosen(ask, config):           # sets distributed_type: FSDP on "yes"
            config["fsdp_config"] = ask_fsdp(ask, config)

Torch-free and yaml-free.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from accel import catalog
from accel.config.options import Option, Section


@dataclass(frozen=True)
class Strategy:
    """A plugin's distributed type chosen by ``--<flag>`` and by an ``accel config`` question."""

    section: Section
    """The strategy's config section; its ``distributed_type`` is the type the strategy selects."""
    flag: str
    """The ``accel launch`` flag without dashes (``use_fsdp``), also the question's answer key."""
    help: str
    """Help of the flag in ``accel launch --help``."""
    question: str
    """The ``accel config`` yes/no question (``Do you want to use DeepSpeed?``)."""

    @property
    def distributed_type(self) -> str:
        """The distributed type the strategy selects (``FSDP``)."""
        if not self.section.distributed_type:
            raise ValueError(
                f"Strategy {self.flag}: section {self.section.key} has no distributed_type"
            )
        return self.section.distributed_type

    @property
    def selector(self) -> Section:
        """``--<flag>`` as a declaration (a store_true option outside any config section)."""
        option = Option(self.flag, bool, help=self.help, store_true=True, in_file=False)
        return Section("", [option], title=self.section.title)

    def add_arguments(self, parser: Any) -> None:
        """Add ``--<flag>`` (store_true) and the section's flags to an argparse parser or group."""
        self.selector.add_arguments(parser)
        self.section.add_arguments(parser)

    def chosen(self, ask: Any, config: dict) -> bool:
        """Whether ``accel config`` uses this strategy; on "yes" sets ``config["distributed_type"]``.

        Asked wherever the strategy runs (:data:`accel.catalog.STRATEGY_BASES`: one process or
        data parallelism on any device kind); not asked (False) when ``config`` already has
        another strategy's distributed type.
        """
        current = str(config.get("distributed_type", "NO")).upper()
        if current not in (*catalog.STRATEGY_BASES, self.distributed_type):
            return False
        if not ask.confirm(self.question, default=False, key=self.flag):
            return False
        config["distributed_type"] = self.distributed_type
        return True


__all__ = ["Strategy"]
