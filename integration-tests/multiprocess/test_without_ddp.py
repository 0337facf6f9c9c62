"""accel-core on 2 real gloo processes with accel-ddp disabled: preparing a model names the package."""

from __future__ import annotations

import pytest


@pytest.mark.timeout(200)
def test_without_accel_ddp_preparing_a_model_names_the_package(run_distributed):
    result = run_distributed("no_ddp_checks.py", timeout=180, env={"ACCEL_DISABLE_PLUGINS": "ddp"})
    assert "ok no_ddp" in result.stdout, result.stdout
