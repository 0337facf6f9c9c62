"""``accel launch`` calls plugin hooks through the plugin manager: a plugin that fails to
import is reported in one line by ``accel plugins`` and by ``accel launch`` (never skipped in
silence), and pluggy's hook options (here ``specname``) hold for launch flags too.

Real installed-looking distributions (``*.dist-info`` with METADATA and entry_points.txt) on
PYTHONPATH of the real ``accel`` executable.
"""

from __future__ import annotations

import os
from pathlib import Path

BROKEN = 'raise ImportError("needs libfoo:\\n  pip install libfoo")\n'
RENAMED = '''"""Its launch hook has another name: pluggy's ``specname`` says which hook it is."""

import accel


@accel.hookimpl(specname="accel_launch_arguments")
def add_flags(parser):
    parser.add_argument("--renamed_flag", help="a flag from a hook with another name")
'''


def _dist(root: Path, name: str, module: str, source: str) -> None:
    info = root / f"accel_{name}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: accel-{name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[accel]\n{name} = {module}\n")
    (root / f"{module}.py").write_text(source)


def test_a_broken_plugin_is_reported_in_one_line_by_plugins_and_launch(accel, tmp_path):
    root = tmp_path / "site"
    _dist(root, "brokenplug", "brokenplug_mod", BROKEN)
    _dist(root, "renamedplug", "renamedplug_mod", RENAMED)
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    error = "ImportError: needs libfoo: pip install libfoo"

    listed = accel("plugins", env=env, plugins="brokenplug,renamedplug")
    assert listed.returncode == 1, listed.stderr  # a load error is a failure
    rows = [line for line in listed.stdout.splitlines() if "brokenplug" in line]
    assert len(rows) == 1 and rows[0].endswith(f"ERROR: {error}"), listed.stdout
    assert "libfoo" not in listed.stdout.replace(rows[0], "")

    launched = accel("launch", "--help", env=env, plugins="brokenplug,renamedplug")
    assert launched.returncode == 0, launched.stderr
    assert launched.stderr.splitlines() == [
        f"accel launch: warning: plugin brokenplug (accel-brokenplug) failed to load: {error}; "
        "its flags are missing (see `accel plugins`)"
    ]
    assert "--renamed_flag" in launched.stdout  # called through pluggy, which honours specname
