"""Accelerate's ``accelerate.utils.megatron_lm`` path: every ``accel.utils`` name, resolved on first use."""

from accel.utils import __dir__, __getattr__  # noqa: F401
