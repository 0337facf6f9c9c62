"""``accel env``: versions, platform, devices and the default config, for bug reports."""

from __future__ import annotations

import platform
import shutil
import sys

from .parsing import Parser


def main(argv: list[str], prog: str = "accel env") -> int:
    """Print the environment block to paste into a bug report."""
    parser = Parser(prog=prog, description="Print the environment, to paste into a bug report.")
    parser.add_argument(
        "--config_file", "--config-file", metavar="PATH", help="config file to show"
    )
    args = parser.parse_args(argv)
    _check_named_config(args.config_file)
    print("\nCopy-and-paste the text below in your GitHub issue\n")
    for label, value in collect(args.config_file):
        if isinstance(value, list):
            print(f"- {label}:")
            for line in value:
                print(f"\t{line}")
        else:
            print(f"- {label}: {value}")
    print()
    return 0


def _check_named_config(config_file: str | None) -> None:
    """A config file the user named (``--config_file`` or ``$ACCEL_CONFIG_FILE``) must be
    usable: a usage error before the report. A broken default file is shown in the report."""
    from accel.config.files import find_config_file

    from .config_paths import read_config

    path, reason = find_config_file(config_file)
    if config_file:
        read_config(config_file)
    elif path is not None and reason.startswith("env "):
        read_config(path, "$" + reason.removeprefix("env "))


def collect(config_file: str | None = None) -> list[tuple[str, object]]:
    """The ``(label, value)`` lines of ``accel env``; a list value prints as indented lines."""
    from importlib import metadata

    import accel

    rows: list[tuple[str, object]] = []
    rows.append(("`accel` version", getattr(accel, "__version__", "?")))
    rows.append(("Platform", platform.platform()))
    rows.append(("`accel` bash location", shutil.which("accel") or _self_path()))
    rows.append(("Python version", platform.python_version()))
    try:
        import numpy

        rows.append(("Numpy version", numpy.__version__))
    except ImportError:
        rows.append(("Numpy version", "not installed"))
    try:
        import torch

        rows.append(
            ("PyTorch version (GPU?)", f"{torch.__version__} ({torch.cuda.is_available()})")
        )
        for kind in ("xpu", "npu", "mlu", "musa"):
            module = getattr(torch, kind, None)
            try:
                available = bool(module is not None and module.is_available())
            except Exception:
                available = False
            rows.append((f"PyTorch {kind.upper()} available", available))
        rows.append(("PyTorch MPS available", torch.backends.mps.is_available()))
        if torch.cuda.is_available():
            rows.append(("GPU count", torch.cuda.device_count()))
            rows.append(("GPU type", torch.cuda.get_device_name()))
        rows.append(("torch.distributed backends", _backends(torch)))
    except ImportError:
        rows.append(("PyTorch version (GPU?)", "not installed"))
    try:
        import psutil

        rows.append(("System RAM", f"{psutil.virtual_memory().total / 2**30:.2f} GB"))
    except ImportError:
        pass
    rows.append(("`accel` default config", _config_lines(config_file)))
    rows.append(("Installed plugins", _plugin_lines(metadata)))
    rows.extend(_hook_lines())
    return rows


def _self_path() -> str:
    import os

    argv0 = sys.argv[0] if sys.argv else ""
    return os.path.abspath(argv0) if os.path.basename(argv0) == "accel" else "not on PATH"


def _backends(torch) -> str:
    import torch.distributed as dist

    if not dist.is_available():
        return "torch.distributed unavailable"
    names = []
    for name, check in (
        ("gloo", dist.is_gloo_available),
        ("nccl", dist.is_nccl_available),
        ("mpi", dist.is_mpi_available),
    ):
        try:
            if check():
                names.append(name)
        except Exception:
            continue
    return ", ".join(names) or "none"


def _config_lines(config_file: str | None) -> object:
    from accel.config.files import find_config_file, read_config_file
    from accel.errors import ConfigError

    path, reason = find_config_file(config_file)
    if path is None:
        return f"Not found ({reason})"
    try:
        data = read_config_file(path)
    except ConfigError as exc:
        return f"{path}: {exc}"
    return [f"- {key}: {_fmt(value)}" for key, value in data.items()] + [f"(from {path})"]


def _fmt(value: object) -> str:
    if isinstance(value, dict) and value:
        return "{" + ", ".join(f"{k}: {v}" for k, v in value.items()) + "}"
    return str(value)


def _plugin_lines(metadata) -> list[str]:
    from accel.plugins import list_plugins

    lines = []
    for info in list_plugins():
        state = f"ERROR {info.error}" if info.error else "ok"
        kind = " (built in)" if info.default else ""
        lines.append(f"{info.name}{kind}: {info.distribution} {info.version} {state}")
    return lines


def _hook_lines() -> list[tuple[str, object]]:
    from accel.plugins import hook

    rows: list[tuple[str, object]] = []
    try:
        for mapping in reversed(hook().accel_env_info()):
            for label, value in (mapping or {}).items():
                rows.append((str(label), value))
    except Exception as exc:  # a plugin's env hook must not break `accel env`
        rows.append(("plugin env info", f"error: {type(exc).__name__}: {exc}"))
    return rows


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
