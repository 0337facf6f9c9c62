"""``accelerate.X`` is the module ``accel.X``; the distribution's name and version."""

from __future__ import annotations

import importlib
import importlib.metadata
import sys
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[3]


def test_version_is_the_mirrored_api_plus_accels():
    import accelerate

    accel_version = (ROOT / "VERSION").read_text().strip()
    expected = accelerate.compat_version(accel_version)
    assert importlib.metadata.version("accelerate") == expected
    assert accelerate.__version__ == expected
    project = tomllib.loads((ROOT / "packages/accelerate-compat/pyproject.toml").read_text())
    assert project["project"]["version"] == expected


def test_version_is_a_plain_release_number():
    """No local label (indexes refuse it), every part an int, the mirrored API first."""
    import accelerate
    from packaging.version import Version

    version = Version(accelerate.__version__)
    assert version.local is None and version.pre is None and version.post is None
    assert version.dev is None and str(version) == accelerate.__version__
    assert [int(part) for part in accelerate.__version__.split(".")] == list(version.release)
    assert version.release[:3] == (1, 15, 0) == Version(accelerate.MIRRORED_API).release
    assert Version("1.15.0") < version < Version("1.15.1")


def test_version_grows_with_accels():
    import accelerate
    from packaging.version import Version

    assert accelerate.compat_version("0.1.0") == "1.15.0.100"
    releases = ["0.1.0", "0.1.1", "0.1.10", "0.2.0", "0.10.0", "0.99.99", "1.0.0", "1.2.3"]
    versions = [Version(accelerate.compat_version(r)) for r in releases]
    assert versions == sorted(versions) and len(set(versions)) == len(versions)
    with pytest.raises(ValueError):
        accelerate.compat_version("0.100.0")


def test_version_satisfies_the_librarys_requirements():
    """What PEFT and TRL declare on ``accelerate`` (their installed metadata) accepts it."""
    from packaging.requirements import Requirement
    from packaging.version import Version

    version = Version(importlib.metadata.version("accelerate"))
    checked = 0
    for library in ("peft", "trl", "diffusers", "transformers"):
        try:
            requires = importlib.metadata.requires(library) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for line in requires:
            requirement = Requirement(line)
            if requirement.name == "accelerate" and requirement.marker is None:
                assert requirement.specifier.contains(version), (library, line)
                checked += 1
    assert checked >= 2  # peft and trl require accelerate unconditionally


@pytest.mark.parametrize(
    "name",
    [
        "accelerator",
        "big_modeling",
        "hooks",
        "state",
        "data_loader",
        "utils",
        "utils.modeling",
        "utils.memory",
        "utils.operations",
        "utils.imports",
        "logging",
        "tracking",
    ],
)
def test_submodule_is_accels_module(name):
    aliased = importlib.import_module(f"accelerate.{name}")
    assert aliased is importlib.import_module(f"accel.{name}")
    assert sys.modules[f"accelerate.{name}"] is aliased


def test_top_level_names_are_accels():
    import accel
    import accelerate

    assert accelerate.Accelerator is accel.Accelerator
    assert accelerate.PartialState is accel.PartialState
    assert accelerate.init_empty_weights is accel.init_empty_weights
    assert "Accelerator" in dir(accelerate)


def test_monkeypatching_accelerate_patches_accel(monkeypatch):
    import accel.big_modeling
    import accelerate.big_modeling

    sentinel = object()
    monkeypatch.setattr(accelerate.big_modeling, "check_device_map", sentinel)
    assert accel.big_modeling.check_device_map is sentinel


def test_hooks_found_by_class_name():
    import accelerate.hooks
    from accel.hooks import AlignDevicesHook

    assert accelerate.hooks.AlignDevicesHook is AlignDevicesHook


def test_unknown_submodule_is_a_module_not_found_error():
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("accelerate.no_such_module")
    with pytest.raises(ImportError):
        exec("from accelerate.utils import no_such_name_anywhere", {})


def test_submodule_has_no_second_copy():
    import accel.utils.modeling

    importlib.import_module("accelerate.utils.modeling")
    copies = [
        n
        for n, m in sys.modules.items()
        if m is not None and getattr(m, "__file__", None) == accel.utils.modeling.__file__
    ]
    assert all(sys.modules[n] is sys.modules["accel.utils.modeling"] for n in copies)


def test_lockfile_takes_accelerate_from_the_workspace():
    """No resolver pulls Accelerate from the index: uv.lock's only ``accelerate`` is this package."""
    lock = tomllib.loads((ROOT / "uv.lock").read_text())
    entries = [p for p in lock["package"] if p["name"] == "accelerate"]
    assert len(entries) == 1
    assert entries[0]["source"] == {"editable": "packages/accelerate-compat"}
    dependents = {
        p["name"]
        for p in lock["package"]
        if any(d["name"] == "accelerate" for d in p.get("dependencies", []))
    }
    assert {"peft", "trl"} <= dependents


def test_transformers_accepts_it():
    transformers_utils = pytest.importorskip("transformers.utils")
    assert transformers_utils.is_accelerate_available()


def test_accel_core_never_imports_accelerate(subprocess_env):
    import subprocess

    code = (
        "import sys, accel, accel.utils, accel.big_modeling, accel.accelerator\n"
        "assert 'accelerate' not in sys.modules, sorted(m for m in sys.modules if 'accelerate' in m)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env=subprocess_env, timeout=120)
