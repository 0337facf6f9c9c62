"""Under the compat package accel's log records go to Accelerate's logger names; without it,
accel's own names stay."""

from __future__ import annotations

import logging
import subprocess
import sys

from accel.env_helpers import convert_dict_to_env_variables
from accelerate import accelerate_logger_name

BAD = {"A B": "1", "C": "2"}  # "A B" is skipped with a warning


def test_records_reach_accelerates_logger_and_its_level_quiets_them(caplog):
    with caplog.at_level(logging.WARNING, logger="accelerate.utils.environment"):
        assert convert_dict_to_env_variables(BAD) == ["C=2\n"]
    assert [r.name for r in caplog.records] == ["accelerate.utils.environment"]
    caplog.clear()
    accelerate_logger = logging.getLogger("accelerate")
    previous = accelerate_logger.level
    accelerate_logger.setLevel(logging.ERROR)  # what users write to quiet Accelerate
    try:
        with caplog.at_level(logging.WARNING):
            convert_dict_to_env_variables(BAD)
    finally:
        accelerate_logger.setLevel(previous)
    assert caplog.records == []


def test_names_map_to_accelerates_modules_or_its_hierarchy():
    assert accelerate_logger_name("accel.env_helpers") == "accelerate.utils.environment"
    assert accelerate_logger_name("accel.checkpoint.manager") == "accelerate.checkpointing"
    assert accelerate_logger_name("accel.big_model.hooks") == "accelerate.hooks"
    assert accelerate_logger_name("accel_fsdp.checkpointing") == "accelerate.utils.fsdp_utils"
    assert accelerate_logger_name("accel.launchers.local") == "accelerate.launchers.local"
    assert accelerate_logger_name("transformers.trainer") == "transformers.trainer"
    assert accelerate_logger_name("accelerator") == "accelerator"  # not accel's


def test_without_importing_accelerate_accel_keeps_its_names(subprocess_env):
    code = (  # accel.env_helpers's logger, without importing torch (a light child process)
        "import logging, sys\n"
        "from accel.logging import get_plain_logger\n"
        "logging.basicConfig(format='%(name)s')\n"
        "get_plain_logger('accel.env_helpers').warning('skipped')\n"
        "assert 'accelerate' not in sys.modules\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        env=subprocess_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines() == ["accel.env_helpers"]
