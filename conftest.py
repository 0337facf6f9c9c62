"""Fixtures for every test of the workspace (packages/*/tests and integration-tests)."""

from __future__ import annotations

import os
import sys

import pytest


@pytest.fixture(autouse=True)
def restore_environment():
    """Undo what a test's code wrote to ``os.environ`` (Accelerate-style helpers such as
    ``enable_fsdp_ram_efficient_loading`` set variables that would steer every later test)."""
    saved = dict(os.environ)
    yield
    if os.environ != saved:
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture(scope="module", autouse=True)
def fresh_accel_state_per_file():
    """Start and end every test file with no Accelerator, process or gradient state: a file
    must not inherit, say, another file's ``mixed_precision`` (under ``pytest -n`` the files
    before it in its worker vary from run to run). Files reset between their own tests where
    they need to (``accel.testing.fixtures.clean_accel_state``)."""
    _reset_accel_state_if_loaded()
    yield
    _reset_accel_state_if_loaded()


@pytest.fixture(autouse=True)
def accel_logger_names():
    """Every test starts with accel's own logger names: importing ``accelerate`` (the compat
    package, also at collection under ``pytest -n``) routes them to Accelerate's; the compat
    package's tests ask for that themselves."""
    if "accel.logging" in sys.modules:
        sys.modules["accel.logging"].route_logger_names(None)


def _reset_accel_state_if_loaded() -> None:
    # only when accel.state is loaded: there is no state otherwise, and importing it here
    # would load torch into tests that check what a light import loads
    if "accel.state" in sys.modules:
        from accel.testing.fixtures import reset_accel_state

        reset_accel_state()


#: Test files that share one session-wide resource: under ``pytest -n`` they run in one worker.
SHARED_SCOPES = {
    # one loopback Ray cluster per session (accel_ray.testing.shared_cluster)
    "ray": ("integration-tests/ray/", "packages/accel-ray/tests/"),
}


def file_scope(nodeid: str) -> str:
    """The unit that one pytest-xdist worker runs whole: the test file, or its
    :data:`SHARED_SCOPES` entry."""
    path = nodeid.split("::", 1)[0]
    for name, prefixes in SHARED_SCOPES.items():
        if path.startswith(prefixes):
            return name
    return path


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``pytest -n N``: each test file on one worker (its module and class fixtures, such as
    a tracker job or a tiny model, run once), Ray's files together (one cluster)."""
    if config.getvalue("dist") != "load":  # an explicit --dist other than the default
        return None
    from xdist.scheduler import LoadScopeScheduling

    class FileScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return file_scope(nodeid)

    return FileScheduling(config, log)
