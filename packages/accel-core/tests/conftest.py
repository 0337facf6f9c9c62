"""Fixtures of accel-core's tests: the shared clean-state fixtures of :mod:`accel.testing.fixtures`."""

from accel.testing.fixtures import clean_accel_state, subprocess_env  # noqa: F401
