"""Accelerate's ``accelerate.utils.transformer_engine`` path: every ``accel.utils`` name, resolved on first use."""

from accel.utils import __dir__, __getattr__  # noqa: F401
