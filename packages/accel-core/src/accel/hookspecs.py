"""Every hook an accel plugin may implement, documented where it is declared.

A plugin is a module registered under the ``accel`` entry-point group; it holds
functions decorated with :data:`hookimpl` whose names match the specs below (an
implementation may take a subset of the arguments: pluggy passes them by name).
Core's own backend, precisions and launchers are registered through these very hooks
(see :mod:`accel.default_plugins`), before the entry points, so a plugin can replace them.
Plugin modules must import nothing heavy at module level: import the third-party library
inside the returned classes or in the hook body.

Each spec says its arguments and return value, how results from several plugins are
combined (pluggy calls implementations last-registered first; "the plugin registered last
wins" means entry points beat core's defaults, and among entry points the name sorting
last), whether the combined result is cached (per plugin manager: rebuilt by
:func:`accel.plugins.reset_plugin_manager`), and who calls the hook and when.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Protocol

import pluggy

if TYPE_CHECKING:
    from accel.backends.base import Backend
    from accel.checkpoint.view import RunView
    from accel.config.options import Section
    from accel.kwargs import KwargsHandler
    from accel.launchers.base import Launcher
    from accel.precision.base import Precision
    from accel.quantization.base import Quantizer
    from accel.tracking.base import GeneralTracker

hookspec = pluggy.HookspecMarker("accel")
"""Marker declaring a hook specification (used only here)."""
hookimpl = pluggy.HookimplMarker("accel")
"""Marker plugins put on their hook implementations."""


class CliCommand(Protocol):
    """What :func:`accel_cli_commands` returns: one ``accel`` subcommand."""

    name: str
    """The subcommand (``accel <name>``)."""
    help: str
    """One line for ``accel --help``."""

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Fill the subcommand's parser (no heavy imports here)."""
        ...

    def run(self, args: argparse.Namespace) -> int:
        """Run the subcommand; return its exit status."""
        ...


class Questions(Protocol):
    """What :func:`accel_config_questions` receives as ``ask`` (accel-cli's ``Ask``)."""

    def select(
        self,
        question: str,
        choices: Sequence[str],
        default: str | None = None,
        key: str | None = None,
    ) -> str:
        """One of ``choices``."""
        ...

    def confirm(self, question: str, default: bool = False, key: str | None = None) -> bool:
        """Yes or no."""
        ...

    def text(
        self,
        question: str,
        default: str = "",
        key: str | None = None,
        validate: Callable[[str], str | None] | None = None,
    ) -> str:
        """Free text; ``validate`` returns an error message or None."""
        ...

    def integer(
        self, question: str, default: int = 0, key: str | None = None, minimum: int | None = None
    ) -> int:
        """A whole number (>= ``minimum``)."""
        ...

    def number(self, question: str, default: float = 0.0, key: str | None = None) -> float:
        """A number."""
        ...


@hookspec
def accel_backends() -> list[type[Backend]] | None:
    """Return the :class:`accel.backends.Backend` subclasses this plugin provides.

    Arguments: none. Return: a list of classes, each with a unique ``name`` and the
    ``distributed_types`` it serves; None or [] for none.
    Combined: every plugin's lists are merged into ``{distributed_type: class}`` and
    ``{name: class}`` (:func:`accel.plugins.registry.backends`, ``backends_by_name``); on a
    type or name several provide, the plugin registered last wins, so an entry point can
    replace core's single-process backend (default plugins register first, then entry points
    sorted by name). Cached: once per plugin manager (rebuilt after
    :func:`accel.plugins.reset_plugin_manager`).
    Called by the resolver (:mod:`accel.connector`) when an ``Accelerator`` is created: the
    class named by ``ACCEL_BACKEND``, else the one serving the resolved distributed type, is
    instantiated with a :class:`~accel.backends.BackendContext` and its
    :meth:`~accel.backends.Backend.setup` called.
    """


@hookspec
def accel_precisions() -> list[type[Precision]] | None:
    """Return the :class:`accel.precision.Precision` subclasses this plugin provides.

    Arguments: none. Return: a list of classes, each listing the ``mixed_precision`` values
    it serves in ``names``; None or [] for none.
    Combined: merged into ``{name: class}`` (:func:`accel.plugins.registry.precisions`); the
    plugin registered last wins on a name several serve. Cached: once per plugin manager.
    Called by the resolver (:mod:`accel.connector`) when an ``Accelerator`` is created, for
    the resolved ``mixed_precision``; an unknown name no plugin serves raises ``ValueError``
    listing the known ones, a known one whose package is absent
    :class:`~accel.errors.MissingPluginError` (``fp8`` -> accel-fp8).
    """


@hookspec
def accel_trackers() -> list[type[GeneralTracker]] | None:
    """Return the :class:`accel.tracking.GeneralTracker` subclasses this plugin provides.

    Arguments: none. Return: a list of classes, each with a unique ``name`` (the
    ``log_with=`` value); None or [] for none.
    Combined: merged into ``{name: class}`` (:func:`accel.plugins.registry.trackers`); the
    plugin registered last wins on a name. Cached: once per plugin manager.
    Called by ``Accelerator.init_trackers`` (on the main process, or on every process for a
    tracker with ``main_process_only = False``) for each name in ``log_with``; ``"all"``
    means every class whose ``is_available()`` is true.
    """


@hookspec
def accel_launchers() -> list[type[Launcher]] | None:
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
def accel_quantizers() -> list[type[Quantizer]] | None:
    """Return the :class:`accel.quantization.Quantizer` subclasses this plugin provides.

    Arguments: none. Return: a list of classes, each with a unique ``name`` (``"bnb"``);
    None or [] for none.
    Combined: merged into ``{name: class}`` (:func:`accel.plugins.registry.quantizers`);
    the plugin registered last wins. Cached: once per plugin manager.
    Called by :func:`accel.utils.load_and_quantize_model`, which picks the quantizer named
    by its ``quantization_config`` and hands it the model.
    """


@hookspec(firstresult=True)
def accel_profile(
    run: RunView, profile_kwargs: KwargsHandler | None
) -> AbstractContextManager[object] | None:
    """Return a context manager that profiles the code it wraps.

    Arguments: ``run``, a :class:`accel.checkpoint.view.RunView` of the calling Accelerator
    (``process_index``, ``wait_for_everyone()``, ...; never the Accelerator); ``profile_kwargs``,
    the ``ProfileKwargs`` passed to ``accelerator.profile()`` or in ``kwargs_handlers``, or
    None. Return: a context manager (yielding the profiler object), or None to decline.
    Combined: ``firstresult``: implementations are called last-registered first and the
    first non-None result wins; no result raises :class:`~accel.errors.MissingPluginError`
    naming accel-profiler. Not cached: called on every ``accelerator.profile()``.
    """


@hookspec
def accel_checkpoint_saved(run: RunView, path: str) -> None:
    """React to a checkpoint that ``accelerator.save_state()`` has just written.

    Arguments: ``run``, a :class:`accel.checkpoint.view.RunView` (the process facts:
    ``process_index``, ``num_processes``, ``local_process_index``, ``is_main_process``,
    ``is_local_main_process``; ``step``; ``checkpoint_path``, the same as ``path``; and
    ``wait_for_everyone()``), never the Accelerator; ``path``, the checkpoint directory.
    Return: None. Combined: every implementation is called. Not cached. Called by
    :meth:`accel.Accelerator.save_state` on every process, after the save returned (a
    synchronous save is complete and renamed into place by then; an ``async_save`` may
    still be writing: call ``run.wait_for_everyone()`` before reading it). accel-ray
    reports the checkpoint to Ray Train here. (The first argument was ``accelerator``, the
    Accelerator itself, up to accel 0.1.0: pluggy passes arguments by name, so an
    implementation still asking for ``accelerator`` is refused when its plugin is registered;
    rename the argument to ``run``.)
    """


@hookspec
def accel_before_resume(run: RunView, checkpoint_root: str) -> None:
    """Place checkpoints kept elsewhere where ``accelerator.resume()`` looks for them.

    Arguments: ``run``, a :class:`accel.checkpoint.view.RunView` (as for
    :func:`accel_checkpoint_saved`; its ``checkpoint_path`` is ``checkpoint_root``);
    ``checkpoint_root``, the run's ``project_dir/checkpoints``. Return: None. Combined:
    every implementation is called. Not cached. Called by :meth:`accel.Accelerator.resume`
    on every process before it chooses the newest complete ``checkpoint_N`` there; a plugin
    copies in (under a temporary name, then renamed) a checkpoint that a scheduler restored
    after a restart (accel-ray: ``ray.train.get_checkpoint()``) and calls
    ``run.wait_for_everyone()`` so the other processes see it. (The first argument was
    ``accelerator`` up to accel 0.1.0.)
    """


@hookspec
def accel_exports() -> dict[str, str] | None:
    """Return the public names this plugin adds to ``accel`` and ``accel.utils``.

    The one mechanism for plugin-owned names, first-party and third-party alike.
    Arguments: none. Return: ``{public name: "module:attribute"}``
    (``{"DeepSpeedPlugin": "accel_deepspeed.config:DeepSpeedPlugin"}``); the module is
    imported only when the name is first used. None or {} for none.
    Combined: merged into one table (:func:`accel.plugins.registry.exports`); on a name
    several plugins export, the plugin registered last wins. Cached: once per plugin manager.
    Called by ``accel.__getattr__`` / ``accel.utils.__getattr__`` on the first access to a
    name core does not define. A name no installed plugin exports but that first-party accel
    offers (:data:`accel.catalog.EXPORTS`) raises :class:`~accel.errors.MissingPluginError`
    naming its package.
    """


@hookspec
def accel_cli_commands() -> list[CliCommand] | None:
    """Return subcommands this plugin adds to the ``accel`` command.

    Arguments: none. Return: a list of objects with ``name`` (the subcommand), ``help`` (one
    line), ``add_arguments(parser)`` (fill an argparse parser) and ``run(args) -> int`` (the
    exit status); None or [] for none.
    Combined: concatenated; a name that is already a built-in command (``launch``,
    ``config``, ...) or was returned by an earlier plugin is ignored (built-ins and the
    first registration win). Not cached: called once per ``accel`` invocation.
    Called by accel-cli's ``main`` while building the command line, so ``accel --help``
    lists the subcommand; keep ``add_arguments`` free of heavy imports.
    """


@hookspec
def accel_launch_arguments(parser: argparse._ArgumentGroup) -> None:
    """Add this plugin's flags to ``accel launch``.

    Arguments: ``parser``, an argparse argument group titled after the plugin (a Section's
    :meth:`~accel.config.options.Section.add_arguments` fills it from the declaration).
    Return: None (the group is filled in place).
    Combined: every implementation is called, each with its own group; a plugin that raises
    is reported by ``accel launch`` and the others still get their flags. Not cached: called
    once per ``accel launch`` parser, in the launching process; ``accel launch --help``
    shows the flags of installed plugins only.
    Routing of the values: a given value goes into this plugin's config section when it owns
    exactly one (``accel_config_sections``), into ``section.key`` when the ``dest`` is
    dotted, or under its own name otherwise; ``--use_<x>`` selector flags choose the
    distributed type. A flag that is not given never overrides the config file
    (precedence: flag > environment > config file > default).
    """


@hookspec
def accel_launch_environment(config: Mapping[str, object]) -> Mapping[str, object] | None:
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
    workers as JSON in ``ACCEL_LAUNCH_CONFIG`` (see :func:`accel.config.launched.launched_config`).
    """


@hookspec
def accel_config_sections() -> (
    Mapping[str, Section | Callable[[Mapping[str, object]], list[str]]] | Sequence[Section] | None
):
    """Return the config-file sections this plugin owns: ``{section_key: Section}``.

    Arguments: none. Return: a mapping of section keys (``fsdp_config``) to a declared
    :class:`accel.config.options.Section` (preferred) or, for older third-party plugins, a
    validator callable ``validator(mapping) -> list[str]`` of error lines (empty when valid);
    a list of Section objects is accepted too. None or {} for none. A Section declares each
    key once (:class:`~accel.config.options.Option`: type, default, choices, help) and is
    itself a validator; the same declaration gives the plugin its ``accel launch`` flags
    (:meth:`~accel.config.options.Section.add_arguments`, called from its
    ``accel_launch_arguments``), its simple ``accel config`` questions
    (:meth:`~accel.config.options.Section.ask`) and its worker-side reader
    (:meth:`~accel.config.options.Section.read`).
    Combined: every plugin's results are merged into one ``{key: validator}`` table by
    :func:`accel.config.registered.section_validators`; on a key several plugins declare, the
    plugin registered last wins. Not cached: built on each call.
    Called by :func:`accel.config.files.check_sections` (``accel launch``, ``accel config``,
    ``load_config_file``) on each non-empty section: the first error line, prefixed with the
    file and the section key, is raised as :class:`~accel.errors.ConfigError`; a key listed
    here is also accepted as a top-level section of the file
    (:func:`accel.config.files.validate`), and ``accel launch`` routes a plugin's
    undotted flags into its section when it owns exactly one.
    """


@hookspec
def accel_config_questions(ask: Questions, config: dict[str, object]) -> None:
    """Ask this plugin's ``accel config`` questions and write the answers into ``config``.

    Arguments: ``ask``, accel-cli's question helper (``ask.select``, ``ask.confirm``,
    ``ask.text``, each with a ``key`` so answers can be given non-interactively); ``config``,
    the mapping being built (core keys are already in it; write your section there).
    Return: None. Combined: every implementation is called, last-registered first (pluggy's
    order: entry points by name in reverse, then core's defaults), each seeing the answers
    of those before it, so a plugin can skip its questions when another strategy was
    already chosen. Not cached.
    Called by ``accel config`` after core's questions, before the file is validated and
    written.
    """


@hookspec
def accel_env_info() -> dict[str, str] | None:
    """Return this plugin's lines for ``accel env`` (versions, detected hardware).

    Arguments: none. Return: ``{label: value}``; None or {} for none.
    Combined: merged in registration order; on a label several return, the plugin
    registered last wins. Not cached: called once per ``accel env``.
    Called by ``accel env`` after core's lines; must not fail when the plugin's third-party
    library is absent (say so in the value instead).
    """
