"""The ``accel`` command line: config, env, launch, test, estimate-memory, plugins, merge-weights,
to-fsdp2.

Importing this package is cheap: every subcommand imports what it needs when it runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from accel.lazy import exports, installed_version

if TYPE_CHECKING:
    __version__: str

__getattr__, __dir__ = exports(
    __name__, {}, computed={"__version__": installed_version("accel-cli")}
)
