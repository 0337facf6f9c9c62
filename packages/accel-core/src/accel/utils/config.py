"""Accelerate's module path: this module *is* :mod:`accel.config.settings`."""

import sys

from accel.config import settings as _module

sys.modules[__name__] = _module
