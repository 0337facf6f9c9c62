"""Every hook an accel plugin may implement.

A plugin is a module registered under the ``accel`` entry-point group; it holds
functions decorated with :data:`hookimpl` whose names match the specs below.
Core's own backend and precisions are registered through these very hooks
(see :mod:`accel.default_plugins`). Plugin modules must import nothing heavy at
module level: import the third-party library inside the returned classes.
"""

from __future__ import annotations

from typing import Any

import pluggy

hookspec = pluggy.HookspecMarker("accel")
"""Marker declaring a hook specification (used only here)."""
hookimpl = pluggy.HookimplMarker("accel")
"""Marker plugins put on their hook implementations."""


@hookspec
def accel_backends() -> list[type]:
    """Return :class:`accel.backends.Backend` subclasses this plugin provides."""


@hookspec
def accel_precisions() -> list[type]:
    """Return :class:`accel.precision.Precision` subclasses this plugin provides."""


@hookspec
def accel_trackers() -> list[type]:
    """Return :class:`accel.tracking.GeneralTracker` subclasses (each with a unique ``name``)."""


@hookspec
def accel_launchers() -> list[type]:
    """Return :class:`accel.launchers.Launcher` subclasses this plugin provides."""


@hookspec
def accel_quantizers() -> list[type]:
    """Return :class:`accel.quantization.Quantizer` subclasses this plugin provides."""


@hookspec(firstresult=True)
def accel_profile(accelerator: Any, profile_kwargs: Any) -> Any:
    """Return a context manager profiling the code it wraps (first non-None wins).

    ``profile_kwargs`` is the ``ProfileKwargs`` handler passed to the Accelerator, or None.
    """


@hookspec
def accel_exports() -> dict[str, str]:
    """Return names this plugin re-exports from ``accel`` / ``accel.utils``.

    Maps a public name (``"FullyShardedDataParallelPlugin"``) to ``"module:attribute"``.
    The module is imported only when the name is first accessed.
    """


@hookspec
def accel_cli_commands() -> list[Any]:
    """Return subcommands for the ``accel`` CLI (objects with ``name``, ``help``, ``add_arguments(parser)``, ``run(args)``)."""


@hookspec
def accel_launch_arguments(parser: Any) -> None:
    """Add this plugin's flags to the ``accel launch`` argument parser (an argparse group).

    A given value goes into this plugin's config section when it owns exactly one
    (``accel_config_sections``), into ``section.key`` when the ``dest`` is dotted, or under
    its own name otherwise. ``--use_<x>`` selector flags choose the distributed type. A flag
    that is not given never overrides the config file.
    """


@hookspec
def accel_launch_environment(config: dict) -> dict[str, str]:
    """Return extra environment variables for the workers ``accel launch`` starts.

    ``config`` holds every resolved setting, sections included; called once, in the
    launcher process. (Every resolved setting also reaches the workers as JSON in
    ``ACCEL_LAUNCH_CONFIG``: see :func:`accel.utils.config.launched_config`.)
    """


@hookspec
def accel_config_sections() -> dict[str, Any]:
    """Return ``{section_key: validator}`` for config-file sections this plugin owns.

    A validator is called with the section's mapping and returns a list of error strings.
    """


@hookspec
def accel_config_questions(ask: Any, config: dict) -> None:
    """Ask this plugin's ``accel config`` questions through ``ask`` and write answers into ``config``."""


@hookspec
def accel_env_info() -> dict[str, str]:
    """Return lines for ``accel env``: ``{label: value}``."""
