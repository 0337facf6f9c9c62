"""The plugin system: real entry points of small test distributions, load errors, allow/deny lists.

Each test builds, in ``tmp_path``, two installed-looking distributions
(``*.dist-info`` folders with METADATA and entry_points.txt) and their modules,
puts ``tmp_path`` on PYTHONPATH and asks a fresh interpreter what it discovers.
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

pytestmark = pytest.mark.timeout(240)

GOOD_PLUGIN = '''
"""A third-party accel plugin: a backend and a precision. Imports nothing heavy."""

import accel

IMPORTED = True


@accel.hookimpl
def accel_backends():
    from accel.backends import Backend

    class FakeBackend(Backend):
        name = "fake"
        distributed_types = ("FAKE",)

    return [FakeBackend]


@accel.hookimpl
def accel_precisions():
    from accel.precision import Precision

    class FakePrecision(Precision):
        names = ("fake8",)

    return [FakePrecision]
'''

BROKEN_PLUGIN = """
raise RuntimeError("broken plugin refuses to import")
"""


def _dist(root: Path, folder: str, name: str, version: str, entry_points: dict[str, str]) -> None:
    info = root / folder
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    lines = "".join(f"{ep} = {module}\n" for ep, module in entry_points.items())
    (info / "entry_points.txt").write_text(f"[accel]\n{lines}")


def _make_plugins(root: Path) -> Path:
    _dist(root, "fake_plugin-1.0.dist-info", "accel-fake", "1.0", {"fake": "fake_accel_plugin"})
    _dist(
        root,
        "broken_plugin-2.0.dist-info",
        "accel-broken",
        "2.0",
        {"broken": "broken_accel_plugin"},
    )
    (root / "fake_accel_plugin.py").write_text(GOOD_PLUGIN)
    (root / "broken_accel_plugin.py").write_text(BROKEN_PLUGIN)
    return root


@pytest.fixture
def plugin_path(tmp_path) -> Path:
    return _make_plugins(tmp_path)


def _run(plugin_path: Path, code: str, **env_vars: str) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACCEL_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(plugin_path), env.get("PYTHONPATH")]))
    env.update(env_vars)
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        cwd=plugin_path,
        capture_output=True,
        text=True,
        timeout=200,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def _installed_entry_points() -> set[str]:
    return {ep.name for ep in metadata.entry_points(group="accel")}


@pytest.fixture(scope="module")
def discovered(tmp_path_factory) -> dict:
    """One interpreter (torch is imported once) with every installed plugin plus the test ones."""
    root = _make_plugins(tmp_path_factory.mktemp("plugins"))
    return _run(
        root,
        """
        import json, sys
        from accel import Accelerator
        from accel.plugins import registry
        from accel.plugins import list_plugins
        infos = {p.name: p.to_dict() for p in list_plugins()}
        backend = registry.get_backend("FAKE")
        precision = registry.get_precision("fake8")
        accelerator = Accelerator(cpu=True)  # ACCEL_BACKEND=fake selects the plugin's backend
        print(json.dumps({
            "plugins": infos,
            "backend": [backend.__module__, backend.__name__, backend.name],
            "precision": [precision.__module__, precision.__name__],
            "core_backend": registry.get_backend("NO").__name__,
            "precisions": sorted(registry.precisions()),
            "selected": [type(accelerator.backend).__module__, type(accelerator.backend).__name__],
        }))
        """,
        ACCEL_BACKEND="fake",
    )


def test_entry_point_plugin_is_discovered(discovered):
    fake = discovered["plugins"]["fake"]
    assert fake["distribution"] == "accel-fake"
    assert fake["version"] == "1.0"
    assert fake["hooks"] == ["accel_backends", "accel_precisions"]
    assert fake["error"] is None and fake["default"] is False
    # the registry resolves the plugin's classes by name
    assert discovered["backend"] == ["fake_accel_plugin", "FakeBackend", "fake"]
    assert discovered["precision"] == ["fake_accel_plugin", "FakePrecision"]
    assert {"no", "fp16", "bf16", "fake8"} <= set(discovered["precisions"])


def test_a_plugin_that_fails_to_import_is_reported_and_the_others_load(discovered):
    plugins = discovered["plugins"]
    broken = plugins["broken"]
    assert broken["distribution"] == "accel-broken"
    assert broken["version"] == "2.0"
    assert broken["error"] == "RuntimeError: broken plugin refuses to import"
    assert broken["hooks"] == []
    assert plugins["fake"]["error"] is None
    # core's default plugins are listed and keep working next to the broken one
    assert plugins["single_process"]["default"] is True
    assert plugins["native_precision"]["distribution"] == "accel-core"
    assert discovered["core_backend"] == "SingleProcessBackend"
    # every installed plugin is listed too
    assert _installed_entry_points() <= set(plugins)


def test_accelerator_uses_a_plugin_backend_selected_by_name(discovered):
    assert discovered["selected"] == ["fake_accel_plugin", "FakeBackend"]


LIST = """
import json, sys
from accel.plugins import list_plugins
infos = {p.name: p.to_dict() for p in list_plugins()}
print(json.dumps({"plugins": infos, "good_imported": "fake_accel_plugin" in sys.modules}))
"""


def test_accel_plugins_allow_list(plugin_path):
    out = _run(plugin_path, LIST, ACCEL_PLUGINS="fake")
    assert set(out["plugins"]) == {"single_process", "native_precision", "local_launchers", "fake"}
    assert out["good_imported"]

    out = _run(plugin_path, LIST, ACCEL_PLUGINS="")
    assert set(out["plugins"]) == {"single_process", "native_precision", "local_launchers"}
    assert not out["good_imported"]


def test_accel_disable_plugins(plugin_path):
    # disable the test's good plugin and every installed one (they would only slow this down)
    disabled = sorted(_installed_entry_points() | {"fake"})
    out = _run(plugin_path, LIST, ACCEL_DISABLE_PLUGINS=", ".join(disabled))
    assert set(out["plugins"]) == {
        "single_process",
        "native_precision",
        "local_launchers",
        "broken",
    }
    assert not out["good_imported"]
    assert out["plugins"]["broken"]["error"].startswith("RuntimeError")  # not disabled: still seen


def test_missing_provider_names_the_package(monkeypatch):
    from accel import plugins
    from accel.errors import MissingPluginError
    from accel.plugins import registry

    # without accel-tpu's entry point loaded, XLA has no backend
    monkeypatch.setenv("ACCEL_DISABLE_PLUGINS", "tpu")
    plugins.reset_plugin_manager()
    try:
        with pytest.raises(MissingPluginError, match="pip install accel-tpu"):
            registry.get_backend("XLA")
    finally:
        monkeypatch.delenv("ACCEL_DISABLE_PLUGINS")
        plugins.reset_plugin_manager()
    with pytest.raises(ValueError, match="unknown mixed_precision 'nope'"):
        registry.get_precision("nope")
