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
    """Return :class:`accel.launchers.Launcher` subclasses this plugin provides.

    Arguments: none. Return: a list of classes (each with a unique ``name``); None or [] for none.
    Combined: every plugin's lists are merged into ``{name: class}`` by
    :func:`accel.plugins.registry.launchers`; on a name several provide, the last registered
    wins, so an entry point can replace core's ``simple`` and ``torchrun`` (the default plugin
    :mod:`accel.default_plugins.local_launchers`). Cached: the table is built once per
    plugin manager (rebuilt after :func:`accel.plugins.reset_plugin_manager`).
    Called by :func:`accel.launchers.choose_launcher` (``accel launch``, before planning): the
    classes are instantiated and asked :meth:`~accel.launchers.Launcher.claims` in decreasing
    ``priority``; the first that claims the job wins (``--launcher NAME`` forces one); its
    :meth:`~accel.launchers.Launcher.plan` returns the :class:`~accel.launchers.LaunchPlan`.
    :func:`accel.notebook_launcher` asks them :meth:`~accel.launchers.Launcher.claims_notebook`
    the same way.
    """


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
    """Return environment variables every worker of a launch gets, whatever the launcher.

    The one way a plugin adds worker variables (``DS_ACCELERATOR=cpu`` for DeepSpeed on the
    CPU, ...). Arguments: ``config``, every resolved setting of the launch, sections
    included (``module`` / ``no_python`` / the script are not in it). Return: a mapping of
    names to values (converted to ``str``); None or {} for none.
    Combined: the mappings are merged over core's ``ACCEL_*`` settings; on a name several
    plugins set, the plugin registered last wins (default plugins are registered first,
    then entry points by name). Not cached: called once per launch, in the launching process, by
    :func:`accel.launchers.worker_environment` (from :func:`accel.launchers.plan_launch`),
    before the launcher is asked for its plan.
    The merged result is handed to :meth:`accel.launchers.Launcher.plan`, which builds the
    plan's environment from it: a launcher adds its own variables there (those that depend
    on how it starts the processes: ``RANK`` for SLURM tasks, ``MASTER_ADDR`` for mpirun,
    ``OMP_NUM_THREADS``) and wins over this hook. Every resolved setting also reaches the
    workers as JSON in ``ACCEL_LAUNCH_CONFIG`` (see :func:`accel.utils.config.launched_config`).
    """


@hookspec
def accel_config_sections() -> dict[str, Any]:
    """Return the config-file sections this plugin owns: ``{section_key: Section}``.

    Arguments: none. Return: a mapping of section keys (``fsdp_config``) to a declared
    :class:`accel.config.sections.Section` (preferred) or, for older third-party plugins, a
    validator callable ``validator(mapping) -> list[str]`` of error lines (empty when valid);
    a list of Section objects is accepted too. None or {} for none. A Section declares each
    key once (:class:`~accel.config.sections.Option`: type, default, choices, help) and is
    itself a validator; the same declaration gives the plugin its ``accel launch`` flags
    (:meth:`~accel.config.sections.Section.add_arguments`, called from its
    ``accel_launch_arguments``), its simple ``accel config`` questions
    (:meth:`~accel.config.sections.Section.ask`) and its worker-side reader
    (:meth:`~accel.config.sections.Section.read`).
    Combined: every plugin's results are merged into one ``{key: validator}`` table by
    :func:`accel.config.settings.section_validators`; on a key several plugins declare, the
    plugin registered last wins. Not cached: built on each call.
    Called by :func:`accel.config.settings.check_sections` (``accel launch``, ``accel config``,
    ``load_config_file``) on each non-empty section: the first error line, prefixed with the
    file and the section key, is raised as :class:`~accel.errors.ConfigError`; a key listed
    here is also accepted as a top-level section of the file
    (:func:`accel.config.settings.validate`), and ``accel launch`` routes a plugin's
    undotted flags into its section when it owns exactly one.
    """


@hookspec
def accel_config_questions(ask: Any, config: dict) -> None:
    """Ask this plugin's ``accel config`` questions through ``ask`` and write answers into ``config``."""


@hookspec
def accel_env_info() -> dict[str, str]:
    """Return lines for ``accel env``: ``{label: value}``."""
