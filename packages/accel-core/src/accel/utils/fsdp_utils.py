"""Accelerate's ``accelerate.utils.fsdp_utils`` path: every ``accel.utils`` name, resolved on first use."""

from accel.utils import __dir__, __getattr__  # noqa: F401
