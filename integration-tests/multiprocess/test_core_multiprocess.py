"""accel-core on 2 real gloo processes: collectives, gather_for_metrics grid, debug mode, sharding, triggers."""

from __future__ import annotations

import pytest


@pytest.mark.timeout(300)
def test_core_features_on_two_processes(run_distributed):
    result = run_distributed("core_checks.py", timeout=280)
    for name in (
        "timeout",
        "operations",
        "split",
        "triggers",
        "gather_for_metrics",
        "debug",
        "epochs",
        "stateful",
    ):
        assert f"ok {name}" in result.stdout, result.stdout


@pytest.mark.timeout(120)
def test_notebook_launcher_runs_collectives_on_two_processes(tmp_path):
    import subprocess
    import sys

    script = tmp_path / "nb.py"
    script.write_text(
        "import torch\n"
        "from accel import notebook_launcher, PartialState\n"
        "from accel.utils import gather, reduce\n"
        "def work(offset):\n"
        "    state = PartialState()\n"
        "    t = torch.tensor([float(state.process_index + offset)])\n"
        "    assert gather(t).tolist() == [offset, offset + 1.0]\n"
        "    assert reduce(t, 'sum').item() == 2 * offset + 1\n"
        "    return state.process_index\n"
        "if __name__ == '__main__':\n"
        "    results = notebook_launcher(work, args=(3,), num_processes=2, use_port=0)\n"
        "    print('results', sorted(results.values()))\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=110
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert "results [0, 1]" in done.stdout
