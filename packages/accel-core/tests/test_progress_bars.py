"""Progress bars of long work, seen as a user sees them: on a terminal (a real pty), not in a pipe.

``save_state`` / ``load_state`` show one bar step per model and optimizer when the state is
large (``PROGRESS_MIN_BYTES``, lowered here so a tiny model counts as large);
``load_checkpoint_and_dispatch`` shows one step per checkpoint shard.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from accel.testing.terminal import environment_without_accel, run_on_terminal

pytestmark = pytest.mark.timeout(300)


def run_python_on_terminal(code: str, cwd: Path) -> tuple[int, str]:
    """Run ``python -c code`` on a pseudo-terminal of 120 columns; (status, output)."""
    env = environment_without_accel(
        OMP_NUM_THREADS="1", ACCEL_USE_CPU="1", COLUMNS="120", TERM="xterm"
    )
    return run_on_terminal([sys.executable, "-c", textwrap.dedent(code)], cwd, env)


def run_in_pipe(code: str, cwd: Path) -> subprocess.CompletedProcess:
    """The same script with its output captured through pipes (a log file, CI)."""
    env = environment_without_accel(OMP_NUM_THREADS="1", ACCEL_USE_CPU="1")
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


STATE = """
import torch
import accel.checkpoint.manager as manager
from accel import Accelerator

manager.PROGRESS_MIN_BYTES = {threshold}
accelerator = Accelerator(cpu=True)
model = torch.nn.Linear(8, 8)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
model, optimizer = accelerator.prepare(model, optimizer)
model(torch.randn(4, 8)).sum().backward()
optimizer.step()
before = {{k: v.clone() for k, v in model.state_dict().items()}}
accelerator.save_state("ckpt")
with torch.no_grad():
    model.weight.zero_()
accelerator.load_state("ckpt")
assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
print("STATE-OK")
"""


def test_save_and_load_state_of_a_large_state_show_a_bar_on_a_terminal(tmp_path):
    status, out = run_python_on_terminal(STATE.format(threshold=0), tmp_path)
    assert status == 0, out
    assert "STATE-OK" in out
    assert "Saving state: 100%" in out and "2/2" in out, out  # the model and the optimizer
    assert "Loading state: 100%" in out, out


def test_a_small_state_or_a_pipe_shows_no_bar(tmp_path):
    status, out = run_python_on_terminal(STATE.format(threshold="1 << 30"), tmp_path)
    assert status == 0, out
    assert "STATE-OK" in out and "Saving state" not in out and "Loading state" not in out, out

    piped = tmp_path / "piped"
    piped.mkdir()
    result = run_in_pipe(STATE.format(threshold=0), piped)
    assert result.returncode == 0, result.stderr
    assert "STATE-OK" in result.stdout
    assert "Saving state" not in result.stderr + result.stdout


DISPATCH = """
import torch
from accel import init_empty_weights, load_checkpoint_and_dispatch
from accel.utils import save_weights

def make():
    return torch.nn.Sequential(*[torch.nn.Linear(16, 16) for _ in range(4)])

torch.manual_seed(0)
reference = make()
save_weights(reference.state_dict(), "weights", max_shard_size="2KB")
with init_empty_weights():
    empty = make()
model = load_checkpoint_and_dispatch(empty, "weights", device_map={"": "cpu"})
x = torch.randn(2, 16)
assert torch.equal(model(x), reference(x))
print("DISPATCH-OK")
"""


def test_load_checkpoint_and_dispatch_shows_a_bar_over_shards(tmp_path):
    status, out = run_python_on_terminal(DISPATCH, tmp_path)
    assert status == 0, out
    assert "DISPATCH-OK" in out
    assert "Loading checkpoint shards: 100%" in out, out
