"""torch's failure report is left out of `accel launch` unless --debug (accel_cli.agent); in-process.

The real 2-process launch is in integration-tests/cli/test_launch_processes.py.
"""

from __future__ import annotations

import os
import sys

import pytest
from accel_cli import agent, launch, supervise

TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"]


def test_the_agent_runs_through_the_quiet_wrapper_only_without_debug():
    wrapped = supervise.quiet_agent([*TORCHRUN, "train.py"])
    assert wrapped == [sys.executable, "-m", "accel_cli.agent", *TORCHRUN[1:], "train.py"]
    other = ["deepspeed", "--num_gpus", "2", "train.py"]
    assert supervise.quiet_agent(other) == other  # another launcher's program is left alone


def test_a_failed_worker_ends_the_wrapped_agent_with_status_1_and_no_traceback(monkeypatch, capsys):
    from torch.distributed import run
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    seen = []

    def failing_main(args):
        seen.append(args)
        error = ChildFailedError.__new__(ChildFailedError)  # torch's needs real failures
        Exception.__init__(error, "accel.launchers.worker FAILED")
        raise error

    monkeypatch.setattr(run, "main", failing_main)
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    with pytest.raises(SystemExit) as exc:
        agent.main(["-m", "torch.distributed.run", "--standalone", "train.py"])
    assert exc.value.code == 1 and exc.value.__cause__ is None
    assert seen == [["--standalone", "train.py"]]
    out, err = capsys.readouterr()
    assert out == err == ""
    with pytest.raises(SystemExit) as exc:
        agent.main(["train.py"])
    assert exc.value.code == 2


@pytest.mark.parametrize(("flags", "debug"), [([], False), (["--debug"], True)])
def test_launch_passes_debug_to_the_supervisor(flags, debug, monkeypatch, tmp_path):
    monkeypatch.setenv("ACCEL_CONFIG_DIR", str(tmp_path / "accel-config"))
    for key in [k for k in os.environ if k.startswith(("ACCEL_", "ACCELERATE_"))]:
        if key != "ACCEL_CONFIG_DIR":
            monkeypatch.delenv(key)
    script = tmp_path / "s.py"
    script.write_text("")
    calls = []
    monkeypatch.setattr(supervise, "supervise", lambda *a, **k: calls.append(k) or 0)
    argv = ["--cpu", "--num_processes", "2", "--quiet", *flags, str(script)]
    assert launch.main(argv) == 0
    assert calls and calls[0]["debug"] is debug


def test_a_launcher_without_worker_records_is_named_and_its_own_refusal_left_alone(capfd):
    env = dict(os.environ)
    killed = [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"]
    assert supervise.supervise(killed, env) == -9
    err = capfd.readouterr().err
    assert f"the job failed ({os.path.basename(sys.executable)} exited with -9)" in err
    assert supervise.program_name([sys.executable, "-m", "accel_ray.driver"]) == "accel_ray.driver"
    usage = [sys.executable, "-c", "import sys; sys.stderr.write('bad address\\n'); sys.exit(2)"]
    assert supervise.supervise(usage, env) == 2
    assert capfd.readouterr().err == "bad address\n"  # its reason, nothing added
