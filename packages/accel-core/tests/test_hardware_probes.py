"""Hardware probes under Accelerate's ``accelerate.utils`` names."""

from __future__ import annotations

import torch


def test_check_cuda_fp8_capability_is_accelerates_probe():
    """Accelerate's own test harness imports it; without a CUDA GPU it is False, not an error."""
    import accel.utils.environment
    from accel.utils import check_cuda_fp8_capability

    assert accel.utils.environment.check_cuda_fp8_capability is check_cuda_fp8_capability
    expected = torch.cuda.is_available() and torch.cuda.get_device_capability() >= (8, 9)
    assert check_cuda_fp8_capability() is expected
