"""Accelerate's module path: this module *is* :mod:`accel.memory`."""

import sys

from accel import memory as _module

sys.modules[__name__] = _module
