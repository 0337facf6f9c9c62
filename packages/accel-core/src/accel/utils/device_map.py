"""Accelerate's module path: this module *is* :mod:`accel.big_model.device_map`."""

import sys

from accel.big_model import device_map as _module

sys.modules[__name__] = _module
