"""``accel``: the entry point. Dispatches to a subcommand module, imported only when used.

Every subcommand module has ``main(argv: list[str], prog: str) -> int``. Plugins add
subcommands through the ``accel_cli_commands`` hook.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    from accel.hookspecs import CliCommand

COMMANDS: dict[str, tuple[str, str]] = {
    "config": ("accel_cli.config_cmd", "create, update or show the configuration file"),
    "env": ("accel_cli.env_cmd", "print the environment, for bug reports"),
    "launch": ("accel_cli.launch", "launch a training script on one or many processes or machines"),
    "test": ("accel_cli.test_cmd", "check the configured launch with a built-in end-to-end script"),
    "estimate-memory": (
        "accel_cli.estimate",
        "estimate the memory a model needs, without loading it",
    ),
    "merge-weights": (
        "accel_cli.merge",
        "merge a sharded (DCP) checkpoint into one safetensors file",
    ),
    "to-fsdp2": ("accel_cli.to_fsdp2", "convert an FSDP1 config file to FSDP2"),
    "plugins": ("accel_cli.plugins_cmd", "list the installed accel plugins"),
}
"""Built-in subcommands: ``name: (module, one-line help)``."""


def _plugin_commands() -> dict[str, CliCommand]:
    try:
        from accel.plugins import hook

        found: dict[str, CliCommand] = {}
        for commands in hook().accel_cli_commands():
            for command in commands or []:
                name = getattr(command, "name", None)
                if name and name not in COMMANDS:
                    found[name] = command
        return found
    except Exception:  # a broken plugin must not break the CLI
        return {}


def _usage(plugin_commands: dict[str, CliCommand]) -> str:
    width = max(len(n) for n in [*COMMANDS, *plugin_commands])
    lines = [
        "usage: accel <command> [<args>]",
        "",
        "accel: run one PyTorch training script on a CPU, GPUs, many machines, FSDP, DeepSpeed, ...",
        "",
        "commands:",
    ]
    for name, (_, text) in COMMANDS.items():
        lines.append(f"  {name:<{width}}  {text}")
    for name, command in sorted(plugin_commands.items()):
        lines.append(f"  {name:<{width}}  {getattr(command, 'help', '')} (plugin)")
    lines += [
        "",
        "options:",
        "  -h, --help        show this message and exit",
        "  --version         print the version of accel",
        "",
        "Run `accel <command> --help` for the options of a command.",
    ]
    return "\n".join(lines) + "\n"


def _run_plugin_command(name: str, command: CliCommand, argv: list[str]) -> int:
    from .parsing import Parser

    parser = Parser(prog=f"accel {name}", description=getattr(command, "help", None))
    command.add_arguments(parser)
    args = parser.parse_args(argv)
    result = command.run(args)
    return int(result or 0)


def run(argv: list[str]) -> int:
    """Run ``accel`` with ``argv`` (without the program name); the exit status."""
    if not argv or argv[0] in ("-h", "--help", "help"):
        sys.stdout.write(_usage(_plugin_commands()))
        return 0 if argv else 2
    if argv[0] == "--version":
        from . import __version__

        sys.stdout.write(f"accel {__version__}\n")
        return 0
    name, rest = argv[0], argv[1:]
    prog = f"accel {name}"
    if name in COMMANDS:
        import importlib

        module = importlib.import_module(COMMANDS[name][0])
        runner = lambda: module.main(rest, prog)  # noqa: E731
    else:
        plugin_commands = _plugin_commands()
        if name not in plugin_commands:
            import difflib

            close = difflib.get_close_matches(name, [*COMMANDS, *plugin_commands], n=1)
            hint = f"did you mean `accel {close[0]}`?" if close else "run `accel --help`"
            from .parsing import fail

            fail(f"unknown command {name!r}; {hint}")
        runner = lambda: _run_plugin_command(name, plugin_commands[name], rest)  # noqa: E731
    return _guarded(runner, prog)


def _guarded(runner: Callable[[], int | None], prog: str) -> int:
    from accel.errors import ConfigError, MissingPluginError

    from .parsing import UsageError, fail

    try:
        return int(runner() or 0)
    except (ConfigError, MissingPluginError, UsageError) as exc:
        fail(str(exc), prog=prog)
    except BrokenPipeError:  # `accel ... | head`
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        sys.stderr.write(f"{prog}: interrupted\n")
        return 130


def main(argv: list[str] | None = None) -> NoReturn:
    """Console-script entry point of ``accel``."""
    raise SystemExit(run(sys.argv[1:] if argv is None else list(argv)))


if __name__ == "__main__":
    main()
