"""Accelerate's module path: this module *is* :mod:`accel.checkpoint.files`."""

import sys

from accel.checkpoint import files as _module

sys.modules[__name__] = _module
