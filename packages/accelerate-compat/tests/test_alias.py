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

    assert issubclass(accelerate.Accelerator, accel.Accelerator)  # Accelerate's rules on top
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


# -- the alias leaves accel's modules as they are ------------------------------------------
# Each check runs in a fresh interpreter: the order of the two imports matters, and the
# pytest process has imported both names long before.


def _run(code: str, env: dict) -> None:
    import subprocess
    import textwrap

    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.parametrize("accel_first", [True, False], ids=["accel-first", "accelerate-first"])
def test_alias_keeps_accels_spec_name_and_loader(accel_first, subprocess_env):
    """``accelerate.X`` is ``accel.X`` with accel's ``__spec__``, ``__name__`` and loader."""
    code = f"""
        import importlib, importlib.machinery, sys
        for name in ("logging", "utils", "hooks", "utils.modeling", "big_modeling"):
            first, second = "accel." + name, "accelerate." + name
            if not {accel_first}:
                first, second = second, first
            module = importlib.import_module(first)
            attributes = ("__spec__", "__name__", "__loader__", "__file__", "__package__")
            before = {{k: getattr(module, k, None) for k in attributes}}
            assert importlib.import_module(second) is module
            after = {{k: getattr(module, k, None) for k in attributes}}
            if {accel_first}:
                assert after == before, (name, before, after)
            spec = module.__spec__
            assert spec.name == module.__name__, (spec, module.__name__)
            assert spec.name.startswith("accel.") and sys.modules[spec.name] is module, spec
            assert spec.origin == module.__file__ and spec.origin.endswith(".py"), spec
            assert isinstance(spec.loader, importlib.machinery.SourceFileLoader), spec.loader
            assert module.__loader__ is spec.loader
            assert sys.modules["accel." + name] is module is sys.modules["accelerate." + name]
    """
    _run(code, subprocess_env)


@pytest.mark.parametrize("accel_first", [True, False], ids=["accel-first", "accelerate-first"])
def test_alias_keeps_accels_resources(accel_first, subprocess_env):
    """``importlib.resources.files("accel.utils")`` lists accel.utils' files, whatever was imported."""
    code = f"""
        import importlib, importlib.resources
        from pathlib import Path
        if {accel_first}:
            import accel.utils
            before = sorted(p.name for p in importlib.resources.files("accel.utils").iterdir())
        import accelerate.utils
        import accel.utils
        folder = Path(accel.utils.__file__).parent
        on_disk = sorted(p.name for p in folder.iterdir())
        after = sorted(p.name for p in importlib.resources.files("accel.utils").iterdir())
        assert after == on_disk and "modeling.py" in after, (after, on_disk)
        if {accel_first}:
            assert after == before, (before, after)
        aliased = sorted(p.name for p in importlib.resources.files("accelerate.utils").iterdir())
        assert aliased == on_disk, aliased
    """
    _run(code, subprocess_env)


def test_reload_through_the_alias_reloads_accels_module(subprocess_env):
    """``importlib.reload(accelerate.X)`` runs accel.X again; both names keep the one module."""
    code = """
        import importlib, sys
        import accelerate.logging, accel.logging
        module, old = accelerate.logging, accelerate.logging.get_logger
        reloaded = importlib.reload(accelerate.logging)
        assert reloaded is module
        assert module.get_logger is not old, "the module was not executed again"
        assert module.__name__ == module.__spec__.name == "accel.logging", module.__spec__
        assert sys.modules["accel.logging"] is module is sys.modules["accelerate.logging"]
        assert accel.logging is module and accelerate.logging is module
    """
    _run(code, subprocess_env)


def test_reload_of_accels_module_keeps_its_name(subprocess_env):
    code = """
        import importlib, sys
        import accel.logging, accelerate.logging
        old = accel.logging.get_logger
        reloaded = importlib.reload(accel.logging)
        assert reloaded is accel.logging and reloaded.get_logger is not old
        assert reloaded.__name__ == reloaded.__spec__.name == "accel.logging", reloaded.__spec__
        assert sys.modules["accel.logging"] is reloaded is sys.modules["accelerate.logging"]
        # and once more through the alias, after accel's own reload
        assert importlib.reload(accelerate.logging).__name__ == "accel.logging"
    """
    _run(code, subprocess_env)


def test_missing_dependency_is_reported_under_its_own_name(tmp_path, subprocess_env):
    """A module of accel that needs a missing package: the error names that package.

    The package lives in a temporary folder on ``accel.__path__``: ``probe/__init__.py``
    imports a module that is not installed. The finder is asked for ``accelerate.probe.leaf``
    before ``accel.probe`` was imported (what ``importlib.util.find_spec`` and other finders'
    callers do), and by an import statement.
    """
    probe = tmp_path / "probe"
    probe.mkdir()
    (probe / "__init__.py").write_text("import no_such_dependency_for_accel_tests\n")
    (probe / "leaf.py").write_text("")
    code = f"""
        import importlib, sys
        import accel, accelerate
        accel.__path__.append({str(tmp_path)!r})
        finders = [f for f in sys.meta_path if type(f).__module__ == "accelerate"]
        assert len(finders) == 1, sys.meta_path
        try:
            finders[0].find_spec("accelerate.probe.leaf")
        except ModuleNotFoundError as error:
            assert error.name == "no_such_dependency_for_accel_tests", (error.name, error)
        else:
            raise AssertionError("the finder hid the missing dependency")
        for name in ("accelerate.probe.leaf", "accelerate.probe"):
            try:
                importlib.import_module(name)
            except ModuleNotFoundError as error:
                assert error.name == "no_such_dependency_for_accel_tests", (error.name, error)
            else:
                raise AssertionError(name + " imported")
        try:
            importlib.import_module("accelerate.no_such_module")
        except ModuleNotFoundError as error:
            assert error.name == "accelerate.no_such_module", error.name
    """
    _run(code, subprocess_env)
