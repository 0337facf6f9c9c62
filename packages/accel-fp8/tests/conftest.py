"""Fixtures of accel-fp8's tests: the shared clean-state fixture of :mod:`accel.testing.fixtures`."""

from accel.testing.fixtures import clean_accel_state  # noqa: F401
