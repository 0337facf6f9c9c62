"""Accelerate's module path: this module *is* :mod:`accel.big_model.dispatch`."""

import sys

from accel.big_model import dispatch as _module

sys.modules[__name__] = _module
