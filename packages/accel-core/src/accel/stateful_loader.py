"""Accelerate's module path: this module *is* :mod:`accel.data.stateful`."""

import sys

from accel.data import stateful as _module

sys.modules[__name__] = _module
