"""Accelerate's module path: this module *is* :mod:`accel.big_model.offload`."""

import sys

from accel.big_model import offload as _module

sys.modules[__name__] = _module
