"""Fixtures for every test of the workspace (packages/*/tests and integration-tests)."""

from __future__ import annotations

import os

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
