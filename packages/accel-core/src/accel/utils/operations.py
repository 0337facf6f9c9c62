"""Accelerate's module path: this module *is* :mod:`accel.distributed.operations`."""

import sys

from accel.distributed import operations as _module

sys.modules[__name__] = _module
