"""``accel plugins`` shows the accel-core range each plugin distribution declares.

A real installed-looking distribution (a ``*.dist-info`` with METADATA and entry_points.txt)
declaring ``accel-core<0.1`` is put on PYTHONPATH of the real ``accel`` executable.
"""

from __future__ import annotations

import json
import os
from importlib import metadata
from pathlib import Path

CORE_VERSION = metadata.version("accel-core")


def _old_plugin(root: Path) -> Path:
    info = root / "accel_oldcli-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: accel-oldcli\nVersion: 1.0\nRequires-Dist: accel-core<0.1\n"
    )
    (info / "entry_points.txt").write_text("[accel]\noldcli = oldcli_plugin\n")
    (root / "oldcli_plugin.py").write_text(
        '"""An outdated plugin."""\n\nimport accel\n\n\n@accel.hookimpl\n'
        'def accel_env_info():\n    return {"oldcli": "yes"}\n'
    )
    return root


def test_plugins_table_and_json_show_the_declared_core_range(accel, tmp_path):
    root = _old_plugin(tmp_path / "site")
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    out = accel("plugins", "--json", env=env, plugins="oldcli,ddp")
    assert out.returncode == 0, out.stderr
    rows = {row["name"]: row for row in json.loads(out.stdout)}
    assert rows["oldcli"]["core_range"] == "<0.1"
    assert rows["oldcli"]["hooks"] == ["accel_env_info"]
    assert rows["ddp"]["core_range"] == ">=0.1,<0.2"  # what packages/accel-ddp declares
    assert rows["single_process"]["core_range"] is None
    # the warning names both versions, once
    assert out.stderr.count("CoreVersionWarning") == 1, out.stderr
    assert "accel-oldcli declares accel-core<0.1" in out.stderr
    assert f"accel-core {CORE_VERSION} is installed" in out.stderr

    table = accel("plugins", env=env, plugins="oldcli,ddp")
    assert table.returncode == 0, table.stderr
    lines = {ln.split()[0]: ln.split() for ln in table.stdout.splitlines()[1:]}
    assert lines["oldcli"][3:6] == ["<0.1", "(excludes", f"{CORE_VERSION})"]
    assert lines["ddp"][3] == ">=0.1,<0.2"
