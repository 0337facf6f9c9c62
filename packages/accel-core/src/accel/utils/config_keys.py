"""Accelerate's module path: this module *is* :mod:`accel.config.keys`."""

import sys

from accel.config import keys as _module

sys.modules[__name__] = _module
