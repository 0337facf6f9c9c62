"""Plugins declare the accel-core range they support; accel warns once when it is excluded.

Real installed-looking distributions (``*.dist-info`` with METADATA carrying
``Requires-Dist: accel-core...`` and entry_points.txt) are written to ``tmp_path``, which a
fresh interpreter gets on PYTHONPATH; the warning is read from its stderr, as a user sees it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from importlib import metadata
from pathlib import Path

import pytest
from accel.plugins import manager
from packaging.specifiers import SpecifierSet
from packaging.version import Version

pytestmark = pytest.mark.timeout(240)

CORE_VERSION = metadata.version("accel-core")

PLUGIN = '''
"""A tiny third-party plugin: one hook, nothing heavy."""

import accel


@accel.hookimpl
def accel_env_info():
    return {"{name}": "present"}
'''


def write_dist(root: Path, name: str, module: str, requires: list[str]) -> None:
    """An installed-looking distribution ``name`` 1.0 with one ``accel`` entry point."""
    info = root / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir()
    lines = [f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n"]
    lines += [f"Requires-Dist: {req}\n" for req in requires]
    (info / "METADATA").write_text("".join(lines))
    (info / "entry_points.txt").write_text(f"[accel]\n{module} = {module}\n")
    (root / f"{module}.py").write_text(PLUGIN.replace("{name}", name))


def run_python(root: Path, code: str, plugins: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACCEL_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    env["ACCEL_PLUGINS"] = plugins
    env.pop("PYTHONWARNINGS", None)  # Python's default filters, as a user has them
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        cwd=root,
        capture_output=True,
        text=True,
        timeout=200,
    )
    assert result.returncode == 0, result.stderr
    return result


LIST_TWICE = """
import json
from accel.plugins import list_plugins, reset_plugin_manager
first = {p.name: p.to_dict() for p in list_plugins()}
reset_plugin_manager()  # a rebuilt manager loads the entry points again: still one warning
second = {p.name: p.to_dict() for p in list_plugins()}
assert first == second
print(json.dumps(first))
"""


@pytest.fixture(scope="module")
def plugins_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("dists")
    write_dist(root, "accel-oldplugin", "old_plugin", ["accel-core<0.1", "numpy>=1"])
    write_dist(root, "accel-goodplugin", "good_plugin", [f"accel-core>={CORE_VERSION}"])
    write_dist(
        root,
        "accel-extraplugin",
        "extra_plugin",  # a range under an extra does not count: only installed requirements do
        ['accel-core<0.1; extra == "legacy"'],
    )
    write_dist(root, "accel-norange", "norange_plugin", ["numpy"])
    return root


def test_excluding_range_warns_once_naming_both_versions(plugins_root):
    result = run_python(plugins_root, LIST_TWICE, "old_plugin,good_plugin")
    infos = json.loads(result.stdout.splitlines()[-1])
    assert infos["old_plugin"]["core_range"] == "<0.1"
    assert infos["old_plugin"]["error"] is None  # it still loads: the warning only informs
    assert infos["old_plugin"]["hooks"] == ["accel_env_info"]
    assert infos["good_plugin"]["core_range"] == f">={CORE_VERSION}"
    assert infos["single_process"]["core_range"] is None
    warnings = [ln for ln in result.stderr.splitlines() if "CoreVersionWarning" in ln]
    assert len(warnings) == 1, result.stderr
    assert "plugin accel-oldplugin declares accel-core<0.1" in warnings[0]
    assert f"accel-core {CORE_VERSION} is installed" in warnings[0]
    assert "accel-goodplugin" not in result.stderr


def test_range_under_an_extra_or_absent_does_not_warn(plugins_root):
    result = run_python(plugins_root, LIST_TWICE, "extra_plugin,norange_plugin")
    infos = json.loads(result.stdout.splitlines()[-1])
    assert infos["extra_plugin"]["core_range"] is None
    assert infos["norange_plugin"]["core_range"] is None
    assert "CoreVersionWarning" not in result.stderr


def test_first_party_plugins_declare_the_range_of_this_core():
    declared = {
        info.distribution: info.core_range
        for info in manager.list_plugins()
        if info.distribution and info.distribution.startswith("accel-") and not info.default
    }
    first_party = {d: r for d, r in declared.items() if (Path(__file__).parents[3] / d).is_dir()}
    assert first_party, declared
    for dist, declared_range in first_party.items():
        assert declared_range, f"{dist} declares no accel-core range"
        assert Version(CORE_VERSION) in SpecifierSet(declared_range), (dist, declared_range)


@pytest.mark.parametrize(
    "declared",
    [">=0.1,<0.2", "<0.1", ">0.1", "==0.1", "!=0.1.0", "<=0.1", ">=0.1.0,<1", "~=0.1", "==0.1.*",
     ">=0.2rc1", "<0.1.0.post1"],
)  # fmt: skip
@pytest.mark.parametrize("version", ["0.1.0", "0.1", "0.2", "0.0.9", "1.0.0", "0.2.0rc1"])
def test_range_check_agrees_with_packaging(declared, version):
    expected = SpecifierSet(declared).contains(Version(version), prereleases=True)
    assert manager.range_contains(declared, version) is expected
