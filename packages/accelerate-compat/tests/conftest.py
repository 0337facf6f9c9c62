"""Fixtures of accelerate-compat's tests: accel's clean-state fixtures."""

from accel.testing.fixtures import clean_accel_state, subprocess_env  # noqa: F401
