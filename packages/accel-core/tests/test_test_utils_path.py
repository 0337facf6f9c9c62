"""``accel.test_utils`` (Accelerate's path) re-exports :mod:`accel.testing.hardware`."""

from __future__ import annotations


def test_test_utils_reexports_the_hardware_helpers():
    import accel.test_utils
    import accel.test_utils.testing
    import accel.testing
    from accel.testing import hardware

    assert accel.test_utils.testing is hardware
    for name in ("get_backend", "require_cuda", "require_multi_gpu"):
        assert getattr(accel.test_utils, name) is getattr(hardware, name)
        assert getattr(accel.testing, name) is getattr(hardware, name)
    device, count, _ = hardware.get_backend()
    assert isinstance(device, str) and count >= 1
