"""Accelerate's ``accelerate.test_utils`` path: re-exports of :mod:`accel.testing.hardware`.

accel's testing helpers live in :mod:`accel.testing` (the plugin conformance kit and the
hardware skips); this package keeps Accelerate's import path for users' test suites.
"""

from accel.testing.hardware import get_backend, require_cuda, require_multi_gpu

__all__ = ["get_backend", "require_cuda", "require_multi_gpu"]
