"""Fixtures of accelerate-compat's tests: accel's clean-state fixtures."""

import pytest
from accel.testing.fixtures import clean_accel_state, subprocess_env  # noqa: F401


@pytest.fixture(autouse=True)
def accelerate_logger_names():
    """accel's records under Accelerate's logger names, as importing ``accelerate`` sets up
    (the root conftest gives every test accel's own names first)."""
    from accel.logging import route_logger_names
    from accelerate import accelerate_logger_name

    route_logger_names(accelerate_logger_name)
    yield
    route_logger_names(None)
