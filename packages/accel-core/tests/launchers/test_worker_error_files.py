"""A failing worker's records: torchelastic's error file in torch's own format, written whole."""

from __future__ import annotations

import json
import subprocess
import sys

from torch.distributed.elastic.multiprocessing.errors import ProcessFailure


def test_a_failed_script_leaves_both_records_complete(tmp_path):
    script = tmp_path / "fails.py"
    script.write_text("raise ValueError('the batch is empty')\n")
    errors = tmp_path / "errors"
    errors.mkdir()
    torchelastic_file = tmp_path / "error.json"
    env = {
        "PATH": "/usr/bin:/bin",
        "RANK": "1",
        "LOCAL_RANK": "1",
        "TORCHELASTIC_ERROR_FILE": str(torchelastic_file),
        "ACCEL_LAUNCH_ERROR_DIR": str(errors),
    }
    run = subprocess.run(
        [sys.executable, "-m", "accel.launchers.worker", "--script", str(script)],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 1, run.stderr
    # The agent's own reader parses the file (an empty or partial file raised JSONDecodeError).
    failure = ProcessFailure(local_rank=1, pid=0, exitcode=1, error_file=str(torchelastic_file))
    assert failure.message["message"] == "ValueError: the batch is empty"
    assert "fails.py" in failure.error_file_data["message"]["extraInfo"]["py_callstack"]
    (record_file,) = errors.iterdir()  # no partial file is left beside the record
    record = json.loads(record_file.read_text())
    assert record["rank"] == "1" and record["error"] == "ValueError: the batch is empty"
    assert not list(tmp_path.glob("*.partial"))
