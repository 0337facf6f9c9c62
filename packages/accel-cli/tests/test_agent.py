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


def test_a_lost_rendezvous_endpoint_ends_the_agent_quietly_with_its_own_status(monkeypatch, capsys):
    from torch.distributed import run
    from torch.distributed.elastic.rendezvous.api import RendezvousConnectionError

    def lost(args):
        raise RendezvousConnectionError("The connection to the C10d store has failed.")

    monkeypatch.setattr(run, "main", lost)
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    with pytest.raises(SystemExit) as exc:
        agent.main(["-m", "torch.distributed.run", "--nnodes", "1:2", "train.py"])
    assert exc.value.code == agent.RENDEZVOUS_LOST and exc.value.__cause__ is None
    assert capsys.readouterr().err == ""


def test_the_launcher_says_in_one_line_that_the_endpoint_was_lost(monkeypatch, capfd):
    """The agent's status (a real child process exiting with it) becomes one line and status 1."""
    torchrun = [*TORCHRUN[:-1], "1", "--nnodes", "1:2", "--rdzv_backend", "c10d"]
    command = [*torchrun, "--rdzv_endpoint", "10.0.0.7:29400", "train.py"]
    exits = [sys.executable, "-c", f"import sys; sys.exit({agent.RENDEZVOUS_LOST})"]
    monkeypatch.setattr(supervise, "quiet_agent", lambda command: exits)
    assert supervise.supervise(command, dict(os.environ)) == 1
    assert capfd.readouterr().err.splitlines() == [
        "accel launch: error: the rendezvous endpoint 10.0.0.7:29400 was lost: the agent that "
        "hosted the c10d rendezvous store (on that node) ended, and this node cannot rejoin "
        "without it; restart the job with an endpoint on a node that stays up "
        "(docs/fault-tolerance.md): it resumes from the newest checkpoint"
    ]
    # another program's own status 3 (not the wrapped agent's) is left alone
    monkeypatch.setattr(supervise, "quiet_agent", lambda command: command)
    assert supervise.supervise(exits, dict(os.environ)) == 3
    assert "rendezvous" not in capfd.readouterr().err
