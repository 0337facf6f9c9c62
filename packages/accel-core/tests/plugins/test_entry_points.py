"""accel.entry_points reads the installed `accel` entry points as importlib.metadata does."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata

from accel.entry_points import entry_points, selected


def test_the_same_entry_points_as_importlib_metadata():
    expected = sorted(
        (ep.name, ep.value, ep.dist.name) for ep in metadata.entry_points(group="accel")
    )
    assert [(ep.name, ep.value, ep.distribution) for ep in entry_points()] == expected
    assert len(expected) > 10


def test_selection_follows_accel_plugins(monkeypatch):
    monkeypatch.setenv("ACCEL_PLUGINS", "fsdp,ray")
    assert selected("fsdp") and not selected("deepspeed")
    monkeypatch.delenv("ACCEL_PLUGINS")
    monkeypatch.setenv("ACCEL_DISABLE_PLUGINS", "fsdp")
    assert not selected("fsdp") and selected("deepspeed")


def test_launch_parser_builds_without_the_plugin_manager():
    """`accel launch --help` loads only the entry-point modules and their declarations."""
    code = (
        "import sys\n"
        "from accel_cli.launch import build_parser\n"
        "text = build_parser().parser.format_help()\n"
        "assert '--use_fsdp' in text and '--fp8_backend' in text, text\n"
        "heavy = ('importlib.metadata', 'accel.plugins.manager', 'accel_fp8.recipes',\n"
        "         'accel_trackers._base', 'accel.kwargs', 'torch', 'yaml')\n"
        "print([name for name in heavy if name in sys.modules])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
