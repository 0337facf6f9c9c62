"""Run Accelerate 1.15's own test files, unchanged, against the workspace's compat ``accelerate``.

    uv run python tools/run_accelerate_tests.py                      # download the sdist, run every file
    uv run python tools/run_accelerate_tests.py --only test_utils test_hooks
    uv run python tools/run_accelerate_tests.py --source /path/to/accelerate --markdown table.md

Not part of the test suite: it downloads Accelerate's source distribution (``pip download
accelerate==1.15.0 --no-deps --no-binary :all:``) unless ``--source`` names an Accelerate source
tree (an unpacked sdist or a git checkout: ``tests/`` and ``src/accelerate/test_utils/``).
``--checkout`` names a git checkout of Accelerate (``fetch`` it, or ``git clone``) for what the
sdist lacks: ``tests/test_configs/``, ``tests/test_samples/``, ``tests/deepspeed/``,
``tests/fsdp/``, ``tests/tp/`` and ``examples/`` (test_examples.py runs them); the sdist's own
files are kept.

Accelerate's tests import ``accelerate.test_utils`` (its test harness: ``testing.py``,
``training.py``, ``scripts/`` it launches by path). The compat distribution does not ship
Accelerate's harness, so the runner builds, under the work directory, a package folder
``site/accelerate`` whose files are links to the compat distribution's (so ``import
accelerate`` runs the compat ``__init__``) plus a link ``test_utils`` to Accelerate's own
harness, and a ``sitecustomize`` that loads ``accelerate.test_utils`` from there (every other
``accelerate.X`` stays the compat alias of ``accel.X``). ``PYTHONPATH`` carries both into the
processes the tests launch. Accelerate's test-only dependencies that the workspace lacks
(``parameterized``, ``pytest-order``) are installed with ``pip install --target`` into the work
directory, never into the workspace.

Each file runs in its own ``pytest`` process (``HF_HUB_OFFLINE=1``); the table counts the
junit XML's outcomes per file, and ``--markdown`` writes it with every failing test.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ACCELERATE_VERSION = "1.15.0"
COMPAT = ROOT / "packages" / "accelerate-compat" / "src" / "accelerate"
TEST_DEPENDENCIES = ("parameterized", "pytest-order")
EXTRA_TEST_DIRS = ("__init__.py", "test_configs", "test_samples", "deepspeed", "fsdp", "tp")

SITECUSTOMIZE = '''\
"""Written by accel's tools/run_accelerate_tests.py: accelerate.test_utils is Accelerate's own."""
import importlib.machinery
import sys


class _AccelerateTestUtilsFinder:
    """Finds accelerate.test_utils[.X] in the package folder, ahead of the compat alias."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname == "accelerate.test_utils" or fullname.startswith("accelerate.test_utils."):
            return importlib.machinery.PathFinder.find_spec(fullname, path)
        return None


import accelerate  # noqa: E402  (the compat package: it installs its alias finder first)

sys.meta_path.insert(0, _AccelerateTestUtilsFinder())
'''

#: ``--placeholders``: Accelerate internals (module-level names outside its documented API, and
#: CLI implementation modules) that some test files import at the top, so that one missing name
#: fails the whole file at collection. A diagnostic run defines each as a placeholder that raises
#: when used, to see how the file's other tests fare; the unchanged run is the one that counts.
INTERNAL_NAMES = {
    "accelerate.big_modeling": ["_refuse_recurrent_layers_under_sequence_parallelism"],
    "accelerate.commands.launch": ["_validate_launch_command"],
    "accelerate.data_loader": ["DataLoaderStateMixin"],
    "accelerate.utils.constants": [
        "BETA_CP_AVAILABLE_PYTORCH_VERSION",
        "BETA_SP_AVAILABLE_DEEPSPEED_VERSION",
        "BETA_TP_AVAILABLE_PYTORCH_VERSION",
        "BETA_TP_AVAILABLE_TRANSFORMERS_VERSION",
    ],
    "accelerate.tracking": ["SwanLabTracker", "TrackioTracker"],  # public, not ported yet
    "accelerate.utils.launch": ["_convert_nargs_to_dict", "prepare_simple_launcher_cmd_env"],
}
INTERNAL_MODULES = {
    "accelerate.commands.estimate": [
        "add_timm_hub_prefix",
        "estimate_command",
        "estimate_command_parser",
        "gather_data",
    ],
    "accelerate.commands.test": ["test_command", "test_command_parser"],
    "accelerate.commands.to_fsdp2": [
        "convert_config_to_fsdp2",
        "to_fsdp2_command",
        "to_fsdp2_command_parser",
    ],
    "accelerate.commands.tpu": ["tpu_command_launcher", "tpu_command_parser"],
}

PLACEHOLDER_PLUGIN = """\
\"\"\"Written by accel's tools/run_accelerate_tests.py --placeholders (a diagnostic run only).\"\"\"
import importlib
import sys
import types

NAMES = {names!r}
MODULES = {modules!r}


class _Placeholder:
    def __init__(self, where):
        self._where = where

    def __call__(self, *args, **kwargs):
        raise NotImplementedError(f"{{self._where}}: an Accelerate internal accel does not provide")

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise NotImplementedError(f"{{self._where}}: an Accelerate internal accel does not provide")


for module_name, names in MODULES.items():
    try:
        importlib.import_module(module_name)
    except ImportError:
        module = types.ModuleType(module_name)
        for name in names:
            setattr(module, name, _Placeholder(f"{{module_name}}.{{name}}"))
        sys.modules[module_name] = module
for module_name, names in NAMES.items():
    module = importlib.import_module(module_name)
    for name in names:
        if not hasattr(module, name):
            where = f"{{module_name}}.{{name}}"
            value = type(name, (), {{}}) if name[:1].isupper() and not name.isupper() else _Placeholder(where)
            setattr(module, name, value)
"""


@dataclass
class FileResult:
    name: str
    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    seconds: float = 0.0
    returncode: int = 0
    failures: list[tuple[str, str]] = field(default_factory=list)
    """(test id, first line of the failure message)."""


def download_sdist(work: Path) -> Path:
    """Accelerate's sdist, unpacked under ``work``; returns the source tree."""
    tree = work / f"accelerate-{ACCELERATE_VERSION}"
    if (tree / "tests").is_dir():
        return tree
    download = work / "download"
    download.mkdir(parents=True, exist_ok=True)
    archive = download / f"accelerate-{ACCELERATE_VERSION}.tar.gz"
    if not archive.exists():
        pip = [sys.executable, "-m", "pip"] if _has_pip(sys.executable) else ["pip"]
        subprocess.run(
            [*pip, "download", f"accelerate=={ACCELERATE_VERSION}", "--no-deps"]
            + ["--no-binary", ":all:", "-d", str(download)],
            check=True,
        )
    with tarfile.open(archive) as tar:
        tar.extractall(work, filter="data")
    return tree


def _has_pip(python: str) -> bool:
    return subprocess.run([python, "-m", "pip", "--version"], capture_output=True).returncode == 0


def install_test_dependencies(work: Path) -> Path:
    """Accelerate's test-only packages the workspace lacks, in ``work/deps`` (not the venv)."""
    deps = work / "deps"
    missing = [
        name
        for name in TEST_DEPENDENCIES
        if subprocess.run(
            [sys.executable, "-c", f"import {name.replace('-', '_')}"], capture_output=True
        ).returncode
        and not (deps / name.replace("-", "_")).exists()
    ]
    if missing:
        pip = [sys.executable, "-m", "pip"] if _has_pip(sys.executable) else ["pip"]
        subprocess.run([*pip, "install", "--no-deps", "--target", str(deps), *missing], check=True)
    return deps


def build_overlay(work: Path, source: Path) -> Path:
    """``work/site``: the compat package with Accelerate's test harness as ``test_utils``."""
    site = work / "site"
    if site.exists():
        shutil.rmtree(site)
    package = site / "accelerate"
    package.mkdir(parents=True)
    for entry in COMPAT.iterdir():
        if entry.name not in ("__pycache__", "test_utils"):
            (package / entry.name).symlink_to(entry)
    (package / "test_utils").symlink_to(source / "src" / "accelerate" / "test_utils")
    (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    plugin = PLACEHOLDER_PLUGIN.format(names=INTERNAL_NAMES, modules=INTERNAL_MODULES)
    (site / "accelerate_internal_placeholders.py").write_text(plugin)
    return site


def prepare_tests(work: Path, source: Path, checkout: Path | None) -> Path:
    """``work/tests``: Accelerate's test files, plus the folders only a git checkout has."""
    tests = work / "tests"
    if tests.exists():
        shutil.rmtree(tests)
    shutil.copytree(source / "tests", tests)
    if checkout is not None:
        for name in EXTRA_TEST_DIRS:
            origin = checkout / "tests" / name
            if origin.exists() and not (tests / name).exists():
                copy = shutil.copytree if origin.is_dir() else shutil.copy2
                copy(origin, tests / name)
        examples = work / "examples"
        if (checkout / "examples").is_dir() and not examples.exists():
            shutil.copytree(checkout / "examples", examples)
    return tests


def test_files(tests: Path, only: list[str]) -> list[Path]:
    files = sorted(tests.glob("test_*.py"))
    for folder in ("deepspeed", "fsdp", "tp"):
        files += sorted((tests / folder).glob("test_*.py"))
    if only:
        files = [f for f in files if f.stem in only or str(f.relative_to(tests)) in only]
    return files


def run_file(
    work: Path, path: Path, env: dict[str, str], timeout: int, placeholders: bool = False
) -> FileResult:
    relative = path.relative_to(work)
    report = work / "reports" / (str(relative).replace("/", "__") + ".xml")
    report.parent.mkdir(exist_ok=True)
    report.unlink(missing_ok=True)
    command = [sys.executable, "-m", "pytest", str(relative), "-q", "-p", "no:cacheprovider"]
    command += ["-c", os.devnull, "--rootdir", str(work), f"--junitxml={report}"]
    command += [f"--timeout={timeout}"]
    if placeholders:
        command += ["-p", "accelerate_internal_placeholders"]
    start = time.monotonic()
    log = work / "logs" / (str(relative).replace("/", "__") + ".log")
    log.parent.mkdir(exist_ok=True)
    with log.open("w") as out:
        process = subprocess.run(command, cwd=work, env=env, stdout=out, stderr=subprocess.STDOUT)
    result = FileResult(str(relative), seconds=time.monotonic() - start)
    result.returncode = process.returncode
    if not report.exists():
        result.errors = 1
        result.failures.append((str(relative), f"pytest exited {process.returncode}, no report"))
        return result
    for case in ET.parse(report).getroot().iter("testcase"):
        test_id = f"{case.get('classname', '')}::{case.get('name', '')}"
        outcome = next(iter(case), None)
        if outcome is None or outcome.tag in ("system-out", "system-err", "properties"):
            result.passed += 1
        elif outcome.tag == "skipped":
            result.skipped += 1
        else:
            message = (outcome.get("message") or outcome.text or "").strip().splitlines()
            result.failures.append((test_id, message[0][:200] if message else outcome.tag))
            if outcome.tag == "failure":
                result.failed += 1
            else:
                result.errors += 1
    return result


def markdown(results: list[FileResult]) -> str:
    lines = [
        "| file | passed | failed | errors | skipped | seconds |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        lines.append(
            f"| `{r.name}` | {r.passed} | {r.failed} | {r.errors} | {r.skipped} | {r.seconds:.0f} |"
        )
    total = FileResult("total")
    for r in results:
        total.passed += r.passed
        total.failed += r.failed
        total.errors += r.errors
        total.skipped += r.skipped
        total.seconds += r.seconds
    lines.append(
        f"| **total** | {total.passed} | {total.failed} | {total.errors} | {total.skipped} "
        f"| {total.seconds:.0f} |"
    )
    failing = [(r.name, test, message) for r in results for test, message in r.failures]
    if failing:
        lines += ["", "Failing tests:", ""]
        lines += [f"- `{test}`: {message}" for _, test, message in failing]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--source", type=Path, help="an Accelerate source tree (default: the sdist)"
    )
    parser.add_argument("--checkout", type=Path, help="a git checkout of Accelerate (see above)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/accelerate-tests"))
    parser.add_argument("--only", nargs="*", default=[], help="file stems (test_utils) or paths")
    parser.add_argument("--timeout", type=int, default=300, help="per test, seconds")
    parser.add_argument("--markdown", type=Path, help="write the table and failures here")
    parser.add_argument(
        "--placeholders",
        action="store_true",
        help="diagnostic: define the Accelerate internals of INTERNAL_NAMES as placeholders "
        "that raise when used, so a file that imports one at the top still runs its other tests",
    )
    args = parser.parse_args(argv)

    work = args.work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    source = args.source.resolve() if args.source else download_sdist(work)
    site = build_overlay(work, source)
    deps = install_test_dependencies(work)
    tests = prepare_tests(work, source, args.checkout)

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(deps)])
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.setdefault("HF_HUB_OFFLINE", "1")
    env.setdefault("HF_DATASETS_OFFLINE", "1")
    env.setdefault("TRANSFORMERS_OFFLINE", "1")

    results = []
    for path in test_files(tests, args.only):
        result = run_file(work, path, env, args.timeout, args.placeholders)
        results.append(result)
        print(
            f"{result.name:60} {result.passed:4} passed, {result.failed:3} failed, "
            f"{result.errors:3} errors, {result.skipped:4} skipped ({result.seconds:.0f} s)",
            flush=True,
        )
    table = markdown(results)
    print(table)
    if args.markdown:
        args.markdown.write_text(table)
    return 0 if all(not r.failures for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
