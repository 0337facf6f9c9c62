"""Accelerate's ``accelerate.utils.torch_xla`` path: every ``accel.utils`` name, resolved on first use."""

from accel.utils import __dir__, __getattr__  # noqa: F401
