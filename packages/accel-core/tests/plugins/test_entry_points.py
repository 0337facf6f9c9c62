"""accel.entry_points reads the installed `accel` entry points as importlib.metadata does."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata

from accel.entry_points import entry_points, version
from accel.plugins.manager import plugin_selected


def test_the_same_entry_points_as_importlib_metadata():
    expected = sorted(
        (ep.name, ep.value, ep.dist.name, ep.dist.version, tuple(ep.dist.requires or ()))
        for ep in metadata.entry_points(group="accel")
    )
    found = [
        (ep.name, ep.value, ep.distribution, ep.dist.version, tuple(ep.dist.requires))
        for ep in entry_points()
    ]
    assert found == expected
    assert len(expected) > 10
    assert version("accel-core") == metadata.version("accel-core")


def test_selection_follows_accel_plugins(monkeypatch):
    monkeypatch.setenv("ACCEL_PLUGINS", "fsdp,ray")
    assert plugin_selected("fsdp") and not plugin_selected("deepspeed")
    monkeypatch.setenv("ACCEL_PLUGINS", "")  # set and empty: no entry-point plugin
    assert not plugin_selected("fsdp")
    monkeypatch.delenv("ACCEL_PLUGINS")
    monkeypatch.setenv("ACCELERATE_DISABLE_PLUGINS", "fsdp")  # Accelerate's spelling too
    assert not plugin_selected("fsdp") and plugin_selected("deepspeed")


def test_launch_parser_builds_through_the_plugin_manager_and_stays_light():
    """`accel launch --help` loads the plugins through the manager, and nothing heavy."""
    code = (
        "import sys\n"
        "from accel_cli.launch import build_parser\n"
        "text = build_parser().parser.format_help()\n"
        "assert '--use_fsdp' in text and '--fp8_backend' in text, text\n"
        "assert 'accel.plugins.manager' in sys.modules\n"
        "heavy = ('importlib.metadata', 'accel_fp8.recipes',\n"
        "         'accel_trackers._base', 'accel.kwargs', 'torch', 'yaml')\n"
        "print([name for name in heavy if name in sys.modules])\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
