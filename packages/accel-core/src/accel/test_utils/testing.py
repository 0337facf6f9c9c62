"""Accelerate's module path: this module *is* :mod:`accel.testing.hardware`."""

import sys

from accel.testing import hardware as _module

sys.modules[__name__] = _module
