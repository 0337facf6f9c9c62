"""Accelerate's module path: this module *is* :mod:`accel.data.loader`."""

import sys

from accel.data import loader as _module

sys.modules[__name__] = _module
