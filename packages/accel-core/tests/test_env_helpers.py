"""accel.env_helpers: environment helpers under Accelerate's names."""

from __future__ import annotations

import logging
import platform
import warnings

from accel.utils import check_os_kernel, convert_dict_to_env_variables


def test_convert_dict_to_env_variables_drops_and_warns_about_forbidden_entries(caplog):
    env = {
        "ACCELERATE_DEBUG_MODE": "1",
        "BAD_ENV_NAME": "<mything",
        "WITH_SPACE": "a b",
        "NEWLINE": "a\nb",
        "EMPTY": "",
        "OTHER_ENV": 2,
    }
    with caplog.at_level(logging.WARNING, logger="accel.env_helpers"):
        lines = convert_dict_to_env_variables(env)
    assert lines == ["ACCELERATE_DEBUG_MODE=1\n", "OTHER_ENV=2\n"]
    skipped = [r.getMessage() for r in caplog.records if r.name == "accel.env_helpers"]
    assert len(skipped) == 4
    assert any("BAD_ENV_NAME" in m for m in skipped)
    assert any("EMPTY" in m for m in skipped)


def test_check_os_kernel_warns_through_the_logger(monkeypatch, caplog):
    monkeypatch.setattr(platform, "system", lambda: "Linux")
    monkeypatch.setattr(platform, "release", lambda: "4.15.0-generic")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warnings.warn any more
        with caplog.at_level(logging.WARNING, logger="accel.env_helpers"):
            check_os_kernel()
    messages = [r.getMessage() for r in caplog.records if r.name == "accel.env_helpers"]
    assert len(messages) == 1 and "4.15.0" in messages[0] and "5.5.0" in messages[0]


def test_check_os_kernel_is_silent_on_a_recent_kernel(monkeypatch, caplog):
    monkeypatch.setattr(platform, "system", lambda: "Linux")
    monkeypatch.setattr(platform, "release", lambda: "6.8.0")
    with caplog.at_level(logging.WARNING, logger="accel.env_helpers"):
        check_os_kernel()
    assert not [r for r in caplog.records if r.name == "accel.env_helpers"]


# --------------------------------------------------------------------------- purge_accelerate_environment


def _set_leaks() -> None:
    import os

    os.environ["ACCEL_MIXED_PRECISION"] = "fp16"
    os.environ["ACCELERATE_USE_FSDP"] = "true"
    os.environ["ACCEL_NEW"] = "1"
    os.environ.pop("ACCELERATE_MIXED_PRECISION", None)


def _before(monkeypatch) -> dict[str, str | None]:
    monkeypatch.setenv("ACCEL_MIXED_PRECISION", "no")
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "false")
    monkeypatch.setenv("ACCELERATE_MIXED_PRECISION", "bf16")
    monkeypatch.delenv("ACCEL_NEW", raising=False)
    return _snapshot()


def _snapshot() -> dict[str, str | None]:
    import os

    names = (
        "ACCEL_MIXED_PRECISION",
        "ACCELERATE_USE_FSDP",
        "ACCELERATE_MIXED_PRECISION",
        "ACCEL_NEW",
    )
    return {name: os.environ.get(name) for name in names}


def test_purge_restores_values_set_before_a_function(monkeypatch):
    from accel.utils import purge_accelerate_environment

    before = _before(monkeypatch)

    @purge_accelerate_environment
    def leaky(value):
        _set_leaks()
        return value

    assert leaky(3) == 3
    assert _snapshot() == before


def test_purge_wraps_inherited_and_subclass_test_methods(monkeypatch):
    import unittest

    from accel.utils import purge_accelerate_environment

    before = _before(monkeypatch)
    seen: dict[str, dict[str, str | None]] = {}

    class Base(unittest.TestCase):
        def test_from_undecorated_base(self):
            _set_leaks()

    @purge_accelerate_environment
    class Decorated(Base):
        def test_a_leaks(self):
            _set_leaks()

        def test_b_sees_no_leak(self):
            seen["decorated"] = _snapshot()

    class Subclass(Decorated):
        def test_c_leaks_in_subclass(self):
            _set_leaks()

        def test_d_sees_no_leak(self):
            seen["subclass"] = _snapshot()

    for case in (Decorated, Subclass):
        suite = unittest.defaultTestLoader.loadTestsFromTestCase(case)
        result = unittest.TestResult()
        suite.run(result)
        assert result.wasSuccessful(), result.errors + result.failures
        assert _snapshot() == before, case.__name__
    assert seen == {"decorated": before, "subclass": before}


def test_purge_works_on_a_plain_class_of_pytest_style_tests(monkeypatch):
    from accel.utils import purge_accelerate_environment

    before = _before(monkeypatch)

    @purge_accelerate_environment
    class TestPlain:
        def test_leaks(self):
            _set_leaks()

    TestPlain().test_leaks()
    assert _snapshot() == before
