"""Accelerate's module path: this module *is* :mod:`accel.rng`."""

import sys

from accel import rng as _module

sys.modules[__name__] = _module
