"""Accelerate's module path: this module *is* :mod:`accel.imports`."""

import sys

from accel import imports as _module

sys.modules[__name__] = _module
