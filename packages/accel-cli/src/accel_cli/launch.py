"""``accel launch``: resolve the settings, pick a launcher, run the script.

Settings come from defaults < config file < a Kubeflow pod's variables < ``ACCEL_*``
environment < flags (see :mod:`accel.config.resolution`). One process runs the script
directly (the launcher process becomes the script); several processes or machines run
``python -m torch.distributed.run``, whose workers get the resolved settings as
``ACCEL_*`` variables. ``--help`` and every bad-input error stay torch-free.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypedDict, cast

from accel import catalog
from accel.config import core_options
from accel.config.options import Option, Section
from accel.errors import UsageError

from .parsing import Parser, underscored

if TYPE_CHECKING:
    from accel.config.kubeflow import JobEnvironment
    from accel.launchers import Launcher, LaunchPlan
    from accel.plugins import PluginInfo
    from pluggy import HookCaller, PluginManager


class _Source(Protocol):
    """Where one resolved setting came from (``kind``: default, file, env, flag, derived)."""

    @property
    def kind(self) -> str: ...

    @property
    def detail(self) -> str: ...


class ResolvedSettings(Protocol):
    """What ``accel launch`` reads of the resolved settings (``resolve_from``'s result)."""

    @property
    def values(self) -> Mapping[str, object]: ...

    @property
    def notes(self) -> list[str]: ...

    @property
    def job(self) -> JobEnvironment | None: ...

    def source(self, key: str) -> _Source: ...


DESCRIPTION = """\
Launch a training script on one process, several processes or several machines.

Settings are taken, lowest precedence first, from the defaults, the config file
(--config_file, $ACCEL_CONFIG_FILE or the default file written by `accel config`),
a Kubeflow pod's variables (PET_NNODES, PET_NODE_RANK, PET_MASTER_ADDR, ...: machines,
rank, rendezvous and processes per machine in a PyTorchJob or TrainJob), ACCEL_*
environment variables and these flags. `accel config show` prints every resolved
setting and where it came from.

Every option may also be written with hyphens, as in Accelerate: --num-processes for
--num_processes, --mixed-precision for --mixed_precision (plugins' options too).
"""

EPILOG = """\
examples:
  accel launch train.py --lr 1e-3
  accel launch --cpu --num_processes 2 train.py
  accel launch --multi_gpu --mixed_precision fp16 --num_processes 2 train.py
  accel launch --num_machines 2 --machine_rank 0 --main_process_ip 10.0.0.1 \\
      --main_process_port 29500 --num_processes 16 train.py
"""

SELECTOR_FLAGS: dict[str, str] = {**catalog.STRATEGY_FLAGS, "tpu": "XLA", "use_xla": "XLA"}
"""Plugin flags that choose the distributed type (``--use_fsdp`` means ``FSDP``)."""

PLUGIN_FLAG_OWNERS: list[tuple[str, str]] = [
    ("--use_fsdp", "accel-fsdp"),
    ("--fsdp_", "accel-fsdp"),
    ("--use_deepspeed", "accel-deepspeed"),
    ("--deepspeed_", "accel-deepspeed"),
    ("--zero_stage", "accel-deepspeed"),
    ("--zero3_", "accel-deepspeed"),
    ("--offload_optimizer", "accel-deepspeed"),
    ("--offload_param", "accel-deepspeed"),
    ("--gradient_clipping", "accel-deepspeed"),
    ("--use_megatron_lm", "accel-megatron"),
    ("--megatron_lm_", "accel-megatron"),
    ("--fp8_", "accel-fp8"),
    ("--tpu", "accel-tpu"),
    ("--use_xla", "accel-tpu"),
    ("--mpirun_", "accel-cluster"),
    ("--slurm_", "accel-cluster"),
    ("--sagemaker_", "accel-cluster"),
    ("--ray", "accel-ray"),
    ("--ray_", "accel-ray"),
    ("--ft", "accel-ft"),
    ("--ft_", "accel-ft"),
]
"""Well-known plugin flags and their package, for a clear error when the plugin is absent."""


@dataclass
class PluginFlag:
    """A flag a plugin added to ``accel launch``."""

    dest: str
    plugin: str
    target: str
    """Where the value goes: a core key, ``"section.key"``, or the dest itself."""
    default: object = None
    """The default the plugin declared (applied by the plugin, never over the config file)."""


@dataclass
class LaunchParser:
    """The ``accel launch`` parser and what each plugin contributed."""

    parser: argparse.ArgumentParser
    plugin_flags: dict[str, PluginFlag] = field(default_factory=dict)
    plugin_errors: list[str] = field(default_factory=list)
    """Plugins whose ``accel_launch_arguments`` raised: ``name: error``."""
    load_errors: list[str] = field(default_factory=list)
    """Plugins that failed to load, one line each (:func:`load_error_line`)."""
    labels: dict[str, str] = field(default_factory=dict)
    """Setting name -> the flag that set it (``use_cpu`` -> ``--cpu``), filled by :func:`flags_from`."""

    def option_of(self, dest: str) -> str:
        """The first option string of ``dest`` (``--cpu`` for ``use_cpu``)."""
        for action in self.parser._actions:
            if action.dest == dest and action.option_strings:
                return action.option_strings[0]
        return f"--{dest}"


LAUNCH_SECTION = Section(
    "",
    [
        Option(
            "config_file",
            str,
            help="config file to use (default: $ACCEL_CONFIG_FILE, else the file `accel config` "
            "writes)",
            metavar="PATH",
            in_file=False,
        ),
        Option(
            "quiet",
            bool,
            help="do not print the resolved topology",
            flag_aliases=("-q",),
            store_true=True,
            in_file=False,
        ),
        Option(
            "dry_run",
            bool,
            help="print the command and ACCEL_* variables instead of running them",
            store_true=True,
            in_file=False,
        ),
        Option(
            "multi_gpu",
            bool,
            help="distributed GPU training (DDP; needs accel-ddp)",
            store_true=True,
            group=core_options.HARDWARE,
            in_file=False,
        ),
        Option(
            "preemption",
            bool,
            help="on SIGTERM every rank finishes its step, saves a checkpoint and exits 75 "
            "(docs/fault-tolerance.md)",
            store_true=True,
            group=core_options.DISTRIBUTED,
            in_file=False,
        ),
        Option(
            "preemption_grace_period",
            float,
            help="with --preemption (implied): seconds after SIGTERM before exiting at once "
            "(default 25)",
            metavar="SECONDS",
            group=core_options.DISTRIBUTED,
            in_file=False,
        ),
        Option(
            "launcher",
            str,
            help="use this launcher instead of the one that claims the job (see `accel plugins`)",
            metavar="NAME",
            group=core_options.DISTRIBUTED,
            in_file=False,
        ),
    ],
    title="accel launch",
)
"""``accel launch``'s own options, which are not settings: declared like settings, so that
every flag of the command comes from a declaration."""

SCRIPT_SECTION = Section(
    "",
    [
        Option(
            "module",
            bool,
            help="the script is a Python module name, run like `python -m`",
            flag_aliases=("-m",),
            store_true=True,
            group="the script",
            in_file=False,
        ),
        Option(
            "no_python",
            bool,
            help="the script is a program, not Python: run it without `python`",
            store_true=True,
            group="the script",
            in_file=False,
        ),
    ],
    title="the script",
)
"""How ``accel launch`` runs the script (only where a script is given)."""

CORE_SECTIONS = (core_options.CORE_SECTION, core_options.DYNAMO_SECTION)
"""Core's declared settings whose flags ``accel launch`` has."""

GROUPS = (
    core_options.HARDWARE,
    core_options.RESOURCES,
    core_options.TRAINING,
    core_options.DISTRIBUTED,
)
"""The headings of ``accel launch --help``, in order (each option names its own)."""


def add_core_arguments(parser: argparse.ArgumentParser, script: bool = True) -> None:
    """Add every core flag of ``accel launch`` to ``parser`` (values stay None when not given).

    Every flag is generated from a declaration: :data:`LAUNCH_SECTION`, core's settings
    (:data:`accel.config.core_options.CORE_SECTION`, ``DYNAMO_SECTION``; converted, with the flag
    named, when the settings are resolved) and, with ``script``, :data:`SCRIPT_SECTION`.
    """
    for title in GROUPS:
        parser.add_argument_group(title)
    for section in CORE_SECTIONS:
        section.add_arguments(parser, check=False)
    LAUNCH_SECTION.add_arguments(parser, check=False)
    if script:
        SCRIPT_SECTION.add_arguments(parser, check=False)
        parser.add_argument("training_script", nargs="?", help="the script to run")
        parser.add_argument(
            "training_script_args", nargs=argparse.REMAINDER, help="the script's own arguments"
        )


LAUNCH_ONLY_DESTS = {
    *(option.name for option in (*LAUNCH_SECTION, *SCRIPT_SECTION)),
    "training_script",
    "training_script_args",
    "json",
    "resolved",
}
"""Parsed names that are not settings of :mod:`accel.config.resolution`."""


def build_parser(
    prog: str = "accel launch", script: bool = True, parser: argparse.ArgumentParser | None = None
) -> LaunchParser:
    """The ``accel launch`` parser: core flags, then each installed plugin's flags.

    ``parser``: add them to this parser (e.g. a subcommand's) instead of a new one.
    """
    if parser is None:
        parser = Parser(prog=prog, description=DESCRIPTION, epilog=EPILOG if script else None)
    add_core_arguments(parser, script=script)
    result = LaunchParser(parser)
    _add_plugin_arguments(result)
    return result


def _add_plugin_arguments(result: LaunchParser) -> None:
    """Each selected plugin's ``accel_launch_arguments``, in a group of its own, called through
    the plugin manager (so pluggy's hook options hold, as for every other hook).

    A plugin that failed to load adds no flags: it is reported in :attr:`LaunchParser.load_errors`
    (one line each, printed by :func:`parse`), never skipped in silence.
    """
    from accel.plugins import get_plugin_manager, list_plugins

    pm = get_plugin_manager()
    infos = list_plugins()
    dists = {info.name: info.distribution for info in infos}
    result.load_errors.extend(load_error_line(info) for info in infos if info.error)
    for impl in pm.hook.accel_launch_arguments.get_hookimpls():
        add_arguments = _one_plugin(pm, "accel_launch_arguments", impl.plugin)
        declare = _one_plugin(pm, "accel_config_sections", impl.plugin)
        name = impl.plugin_name
        _add_plugin(result, name, dists.get(name), add_arguments, declare)


def _one_plugin(pm: PluginManager, hook_name: str, plugin: object) -> HookCaller:
    """The hook ``hook_name`` of the plugin manager restricted to ``plugin``'s implementation."""
    others = [p for p in pm.get_plugins() if p is not plugin]
    return pm.subset_hook_caller(hook_name, remove_plugins=others)


def load_error_line(info: PluginInfo) -> str:
    """One line for a plugin that failed to load: its name, distribution and error."""
    return f"plugin {info.name} ({info.distribution or 'unknown distribution'}) failed to load: {info.error}"


def _add_plugin(
    result: LaunchParser,
    name: str,
    dist: str | None,
    add_arguments: HookCaller,
    declare: HookCaller,
) -> None:
    parser = result.parser
    group = parser.add_argument_group(f"{name} options ({dist or 'plugin'})")
    before = {id(a) for a in parser._actions}
    try:
        add_arguments(parser=group)
    except Exception as exc:  # a broken plugin must not break `accel launch`
        result.plugin_errors.append(f"{name}: {type(exc).__name__}: {exc}")
        return
    sections: list[str] = []
    try:
        from accel.config.registered import section_table

        sections = [key for found in declare() for key in section_table(found)]
    except Exception:
        sections = []
    for action in parser._actions:
        if id(action) in before or action.dest in (None, argparse.SUPPRESS, "help"):
            continue
        result.plugin_flags[action.dest] = PluginFlag(
            action.dest, name, _target(action.dest, sections), action.default
        )
        # "not given" must stay distinguishable from the plugin's default, so that a
        # flag's default never overrides the config file
        action.default = argparse.SUPPRESS


def _target(dest: str, sections: list[str]) -> str:
    from accel.config.core_options import KEYS

    if dest in SELECTOR_FLAGS or dest in KEYS or "." in dest:
        return dest
    if len(sections) == 1:
        return f"{sections[0]}.{dest}"
    return dest


def parse(
    argv: list[str],
    prog: str = "accel launch",
    script: bool = True,
    configure: Callable[[argparse.ArgumentParser], None] | None = None,
) -> tuple[argparse.Namespace, LaunchParser]:
    """Parse ``argv``; returns ``(namespace, LaunchParser)``. Unknown flags fail clearly.

    ``configure(parser)`` may add options first (``accel config show`` adds ``--json``).
    """
    lp = build_parser(prog, script=script)
    for line in lp.load_errors:  # before --help exits: its flags are missing from it
        sys.stderr.write(f"{prog}: warning: {line}; its flags are missing (see `accel plugins`)\n")
    if configure is not None:
        configure(lp.parser)
    ns, extras = lp.parser.parse_known_args(argv)
    for token in extras:
        if not token.startswith("-"):
            continue
        flag = underscored(token.split("=", 1)[0])
        for prefix, package in PLUGIN_FLAG_OWNERS:
            if flag == prefix or (prefix.endswith("_") and flag.startswith(prefix)):
                from accel.config.providers import disabled_by, installed_but_disabled
                from accel.errors import MissingPluginError

                extra = ""
                if installed_but_disabled(package):
                    extra = f" ({package} is installed but not loaded: {disabled_by()})"
                raise MissingPluginError(f"{flag}", package, extra)
    if extras:
        import difflib

        flag = extras[0].split("=", 1)[0]
        options = [o for a in lp.parser._actions for o in a.option_strings]
        close = difflib.get_close_matches(flag, options, n=1)
        hint = f"did you mean {close[0]}?" if close else f"see `{prog} --help`"
        if flag.startswith("-"):
            raise UsageError(f"unknown option {flag}; {hint}")
        raise UsageError(f"unexpected argument {extras[0]!r}; {hint}")
    return ns, lp


def argv_from_namespace(ns: argparse.Namespace, parser: argparse.ArgumentParser) -> list[str]:
    """The command line that parses to ``ns``'s current values (fields set after parsing count).

    Options come first, then ``training_script`` and ``training_script_args``; a value that
    is None (or absent) is left out, as is a ``store_true`` flag that is false.
    """
    argv: list[str] = []
    positionals: list[str] = []
    for action in parser._actions:
        if action.dest in (None, argparse.SUPPRESS, "help") or isinstance(
            action, argparse._SubParsersAction
        ):
            continue
        value = getattr(ns, action.dest, None)
        if value is None or value is argparse.SUPPRESS:
            continue
        if not action.option_strings:
            positionals.extend(str(v) for v in (value if isinstance(value, list) else [value]))
            continue
        option = next((o for o in action.option_strings if o.startswith("--")), None)
        option = option or action.option_strings[0]
        if isinstance(action, argparse.BooleanOptionalAction):
            argv.append(option if value else "--no-" + option[2:])
        elif isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction)):
            if value == action.const:
                argv.append(option)
        elif isinstance(action, argparse._StoreConstAction):
            if value == action.const:
                argv.append(option)
        elif isinstance(action, argparse._CountAction):
            argv.extend([option] * int(value))
        elif isinstance(action, argparse._AppendAction):
            for item in value:
                argv.extend([option, *(map(str, item) if isinstance(item, list) else [str(item)])])
        elif isinstance(value, (list, tuple)):
            argv.extend([option, *map(str, value)])
        else:
            text = str(value).lower() if isinstance(value, bool) else str(value)
            # one token where possible: a value may start with "-"
            argv.extend([f"{option}={text}"] if option.startswith("--") else [option, text])
    return argv + positionals


def _machine_range(value: str) -> dict[str, int]:
    """``--nnodes MIN:MAX`` (torchrun's elastic membership) as settings."""
    low, _, high = value.partition(":")
    try:
        minimum, maximum = int(low), int(high)
    except ValueError:
        raise UsageError(
            f"--num_machines {value!r}: use a number, or MIN:MAX for elastic membership (e.g. 1:2)"
        ) from None
    if not 1 <= minimum <= maximum:
        raise UsageError(f"--num_machines {value!r}: MIN:MAX needs 1 <= MIN <= MAX")
    return {"num_machines": minimum, "max_num_machines": maximum}


def flags_from(ns: argparse.Namespace, lp: LaunchParser) -> dict[str, object]:
    """The settings given as flags, by setting name (``section.key`` for plugin sections)."""
    flags: dict[str, object] = {}
    selected: list[tuple[str, str]] = []
    for dest, value in vars(ns).items():
        if value is None:
            continue
        if dest in LAUNCH_ONLY_DESTS:
            continue
        if dest in core_options.DYNAMO_KEYS:  # --dynamo_* parse into Accelerate's names
            flags[f"{core_options.DYNAMO_SECTION.key}.{dest}"] = value
            continue
        if dest == "num_machines" and isinstance(value, str) and ":" in value:
            flags.update(_machine_range(value))
            continue
        info = lp.plugin_flags.get(dest)
        if info is None:
            flags[dest] = value
            continue
        if dest in SELECTOR_FLAGS:
            if value:
                selected.append((f"--{dest}", SELECTOR_FLAGS[dest]))
            continue
        flags[info.target] = value
    if ns.multi_gpu:
        selected.append(("--multi_gpu", "MULTI_GPU"))
    for name in flags:
        dest = name.removeprefix(f"{core_options.DYNAMO_SECTION.key}.")
        lp.labels[name] = lp.option_of(
            next((d for d, i in lp.plugin_flags.items() if i.target == name), dest)
        )
    kinds = {kind for _, kind in selected}
    if len(kinds - {"MULTI_GPU"}) > 1:
        names = " and ".join(flag for flag, kind in selected if kind != "MULTI_GPU")
        raise UsageError(f"{names} contradict each other: choose one distributed type")
    if selected:
        plugin_kinds = kinds - {"MULTI_GPU"}
        flags["distributed_type"] = plugin_kinds.pop() if plugin_kinds else "MULTI_GPU"
        lp.labels["distributed_type"] = next(
            f for f, k in selected if k == flags["distributed_type"]
        )
        if ns.use_cpu and flags["distributed_type"] == "MULTI_GPU":
            raise UsageError(
                "--cpu and --multi_gpu contradict each other: use --cpu --num_processes N "
                "for several CPU processes"
            )
    return flags


def resolve_from(ns: argparse.Namespace, lp: LaunchParser):
    """The resolved settings for a parsed ``accel launch`` / ``accel config show`` command line."""
    from accel.config.resolution import resolve

    from .config_paths import config_to_read

    if ns.config_file:
        config_to_read(ns.config_file)
    flags = flags_from(ns, lp)
    return resolve(flags=flags, config_file=ns.config_file, flag_labels=lp.labels)


# --------------------------------------------------------------------------- running


def _check_script(ns: argparse.Namespace, prog: str) -> list[str]:
    if not ns.training_script:
        raise UsageError(
            f"the script to run is missing: {prog} [options] script.py [script arguments]"
        )
    if ns.module and ns.no_python:
        raise UsageError("--module and --no_python cannot be used together: choose one")
    script = ns.training_script
    if ns.module:
        import importlib.util

        if not script.replace(".", "").replace("_", "").isalnum():
            raise UsageError(f"-m {script!r} is not a module name such as package.train")
        sys.path.insert(0, os.getcwd())  # where `python -m` will look first
        try:
            found = importlib.util.find_spec(script) is not None
        except (ImportError, ValueError):
            found = False
        finally:
            sys.path.pop(0)
        if not found:
            raise UsageError(f"-m {script}: no module named {script!r} on sys.path")
    elif ns.no_python:
        if shutil.which(script) is None and not Path(script).is_file():
            raise UsageError(f"--no_python {script}: no such program on PATH")
    else:
        path = Path(script)
        if not path.exists():
            raise UsageError(
                f"script {script!r} does not exist (looked in {os.getcwd()}); check the path"
            )
        if path.is_dir():
            raise UsageError(f"script {script!r} is a directory; pass the .py file to run")
    return [script, *ns.training_script_args]


def worker_environment(resolved: ResolvedSettings) -> dict[str, str]:
    """The ``ACCEL_*`` (and device) variables every worker gets for ``resolved`` (plugins' included)."""
    from accel.launchers import worker_environment as environment_for

    return environment_for(resolved.values)


def choose_launcher(config: Mapping[str, object], name: str | None = None) -> Launcher:
    """The launcher for ``config``: ``name`` if given, else the highest-priority one claiming it."""
    from accel.launchers import choose_launcher as choose

    return choose(config, name)


class LaunchSummary(TypedDict):
    """What :func:`plan` returns: everything ``accel launch`` would do."""

    ns: argparse.Namespace
    resolved: ResolvedSettings
    config: dict[str, object]
    launcher: Launcher
    plan: LaunchPlan
    command: list[str]
    env: dict[str, str]


def plan(argv: list[str], prog: str = "accel launch") -> LaunchSummary:
    """Everything ``accel launch argv`` would do, without doing it.

    A dict with the parsed ``ns``, the ``resolved`` settings, the launcher's ``config``, the
    ``launcher``, and its :class:`accel.launchers.LaunchPlan` (``plan``) with its ``command``
    and ``env``.
    """
    ns, lp = parse(argv, prog)  # --help ends here: accel.launchers is not needed for it
    from accel.launchers import plan_launch

    if lp.plugin_errors:
        sys.stderr.write(f"{prog}: warning: {'; '.join(lp.plugin_errors)}\n")
    script = _check_script(ns, prog)
    resolved = resolve_from(ns, lp)
    config = dict(resolved.values)
    config.update(
        module=bool(ns.module),
        no_python=bool(ns.no_python),
        training_script=script[0],
        training_script_args=script[1:],
    )
    values = dict(resolved.values)
    if values.get("rdzv_backend") != "static" and resolved.source("machine_rank").kind == "default":
        # a dynamic rendezvous numbers the machines itself (an elastic Kubeflow job has no rank)
        values["machine_rank"] = config["machine_rank"] = None
    launcher = choose_launcher(config, ns.launcher)
    launch_plan = plan_launch(
        values, script, launcher, module=bool(ns.module), no_python=bool(ns.no_python)
    )
    return {
        "ns": ns,
        "resolved": resolved,
        "config": config,
        "launcher": launcher,
        "plan": launch_plan,
        "command": launch_plan.argv,
        "env": launch_plan.environment,
    }


def preemption_environment(ns: argparse.Namespace) -> dict[str, str]:
    """``ACCEL_PREEMPTION*`` for ``--preemption`` / ``--preemption_grace_period`` (and torchrun's shutdown wait)."""
    from accel import env_vars

    grace = getattr(ns, "preemption_grace_period", None)
    if not getattr(ns, "preemption", None) and grace is None:
        return {}
    env = {env_vars.PREEMPTION: "true"}
    if grace is not None:
        try:
            seconds = float(grace)
        except ValueError:
            raise UsageError(
                f"--preemption_grace_period {grace!r}: give a number of seconds"
            ) from None
        if seconds <= 0:
            raise UsageError("--preemption_grace_period must be more than 0 seconds")
        env[env_vars.PREEMPTION_GRACE_PERIOD] = f"{seconds:g}"
    else:
        seconds = 25.0
    # the torchrun agent waits this long for its workers after SIGTERM before SIGKILL
    env["TORCH_ELASTIC_SHUTDOWN_TIMEOUT"] = str(int(seconds) + 5)
    return env


TOPOLOGY_KEYS = (
    "num_machines",
    "max_num_machines",
    "machine_rank",
    "main_process_ip",
    "main_process_port",
    "rdzv_backend",
    "nproc_per_node",
    "num_processes",
    "max_restarts",
)
"""Settings the summary line shows with their origin when a Kubeflow pod's environment is read."""


def _origins(resolved: ResolvedSettings, job: JobEnvironment) -> str:
    """``num_machines=2 (env PET_NNODES), ...``: the machine settings and where each came from."""
    shown = []
    for name in TOPOLOGY_KEYS:
        source = resolved.source(name)
        if source.kind == "default" and name not in job.settings:
            continue
        origin = f"derived: {source.detail}" if source.kind == "derived" else str(source)
        shown.append(f"{name}={resolved.values.get(name)} ({origin})")
    return ", ".join(shown)


def _topology(
    config: Mapping[str, object],
    launch_plan: LaunchPlan,
    resolved: ResolvedSettings | None = None,
) -> str:
    machines = launch_plan.num_machines
    nproc = launch_plan.nproc_per_node
    elastic = cast("int | None", config.get("max_num_machines"))
    parts = [
        f"{machines}{f'-{elastic}' if elastic else ''} machine"
        f"{'s' if (elastic or machines) > 1 else ''} x {nproc} process{'es' if nproc > 1 else ''}"
    ]
    if machines > 1 or elastic:
        if launch_plan.machine_rank is not None:
            parts[0] += f" (this is machine {launch_plan.machine_rank})"
        else:
            parts[0] += " (machine rank from the rendezvous)"
        if launch_plan.where == "this machine":
            parts.append(
                f"rendezvous {config['rdzv_backend']} at {config['main_process_ip']}:"
                f"{config.get('main_process_port') or 29500}"
            )
    if launch_plan.where != "this machine":
        parts.append(f"on {launch_plan.where}")
    parts.append(f"distributed_type {config['distributed_type']}")
    parts.append(f"mixed_precision {config['mixed_precision']}")
    if config.get("max_restarts"):
        parts.append(f"max_restarts {config['max_restarts']}")
    parts.append(f"launcher {launch_plan.launcher}")
    line = "accel launch: " + ", ".join(parts)
    if resolved is not None and resolved.job is not None:
        line += "; Kubeflow pod: " + _origins(resolved, resolved.job)
    return line


def main(argv: list[str], prog: str = "accel launch") -> int:
    """Run ``accel launch``."""
    p = plan(argv, prog)
    ns, resolved, config = p["ns"], p["resolved"], p["config"]
    for note in resolved.notes:
        if not ns.quiet:
            sys.stderr.write(f"{prog}: note: {note}\n")
    command, env = p["command"], p["env"]
    env.update(preemption_environment(ns))
    if ns.dry_run:
        sys.stdout.write(f"launcher: {p['launcher'].name}\n")
        sys.stdout.write(f"command: {shlex.join(command)}\n")
        for key in sorted(env):
            sys.stdout.write(f"env: {key}={env[key]}\n")
        return 0
    full_env = dict(os.environ)
    if resolved.job is not None:
        from accel.config.kubeflow import AGENT_DROPPED_VARIABLES, POD_PROCESS_VARIABLES

        for name in AGENT_DROPPED_VARIABLES:  # read here; torchrun would fail on them
            full_env.pop(name, None)
        if p["plan"].replace_process:
            for name in POD_PROCESS_VARIABLES:  # the pod's world is not this lone process's
                full_env.pop(name, None)
    full_env.update(env)
    if p["plan"].replace_process:
        if resolved.job is not None and not ns.quiet:  # what the pod's variables decided
            sys.stderr.write(_topology(config, p["plan"], resolved) + "\n")
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            os.execvpe(command[0], command, full_env)
        except OSError as exc:
            raise UsageError(f"cannot run {command[0]}: {exc.strerror}") from None
    if not ns.quiet:
        sys.stderr.write(_topology(config, p["plan"], resolved) + "\n")
        sys.stderr.flush()
    from .supervise import supervise

    return supervise(command, full_env, prog=prog, debug=bool(config.get("debug")))


if __name__ == "__main__":  # `python -m accel_cli.launch ...` is `accel launch ...`
    from .main import run

    raise SystemExit(run(["launch", *sys.argv[1:]]))
