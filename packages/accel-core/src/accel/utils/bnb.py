"""Accelerate's ``accelerate.utils.bnb`` path: every ``accel.utils`` name, resolved on first use."""

from accel.utils import __dir__, __getattr__  # noqa: F401
