"""Accelerate's module path: this module *is* :mod:`accel.big_model.hooks`."""

import sys

from accel.big_model import hooks as _module

sys.modules[__name__] = _module
