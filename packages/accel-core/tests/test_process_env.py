"""accel.process_env: environment helpers under Accelerate's names."""

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
    with caplog.at_level(logging.WARNING, logger="accel.process_env"):
        lines = convert_dict_to_env_variables(env)
    assert lines == ["ACCELERATE_DEBUG_MODE=1\n", "OTHER_ENV=2\n"]
    skipped = [r.getMessage() for r in caplog.records if r.name == "accel.process_env"]
    assert len(skipped) == 4
    assert any("BAD_ENV_NAME" in m for m in skipped)
    assert any("EMPTY" in m for m in skipped)


def test_check_os_kernel_warns_through_the_logger(monkeypatch, caplog):
    monkeypatch.setattr(platform, "system", lambda: "Linux")
    monkeypatch.setattr(platform, "release", lambda: "4.15.0-generic")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warnings.warn any more
        with caplog.at_level(logging.WARNING, logger="accel.process_env"):
            check_os_kernel()
    messages = [r.getMessage() for r in caplog.records if r.name == "accel.process_env"]
    assert len(messages) == 1 and "4.15.0" in messages[0] and "5.5.0" in messages[0]


def test_check_os_kernel_is_silent_on_a_recent_kernel(monkeypatch, caplog):
    monkeypatch.setattr(platform, "system", lambda: "Linux")
    monkeypatch.setattr(platform, "release", lambda: "6.8.0")
    with caplog.at_level(logging.WARNING, logger="accel.process_env"):
        check_os_kernel()
    assert not [r for r in caplog.records if r.name == "accel.process_env"]
