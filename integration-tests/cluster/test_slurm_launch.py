"""`srun accel launch ...` on loopback: the tasks get SLURM-shaped environments, the rest is real.

There is no slurmd here: each "task" is a real `accel launch` process given the variables
srun would set. Task mode starts one worker per task; node mode one torchrun per "node".
"""

from __future__ import annotations

import pytest

from .conftest import WORKERS, clean_env, finish, start


def _slurm(**values: object) -> dict[str, str]:
    return {f"SLURM_{k.upper()}": str(v) for k, v in values.items()}


@pytest.mark.timeout(300)
def test_two_tasks_one_process_each(tmp_path):
    common = _slurm(job_id=7001, ntasks=2, nnodes=1, job_nodelist="localhost", tasks_per_node=2)
    processes = []
    for rank in range(2):
        env = clean_env(tmp_path, **common, **_slurm(procid=rank, localid=rank, nodeid=0))
        argv = ["launch", "--cpu", str(WORKERS / "rank_check.py"), "2"]
        processes.append(start(argv, env, tmp_path))
    results = finish(processes, timeout=240)
    for rank, (code, out, err) in enumerate(results):
        assert code == 0, out + err
        assert "launcher slurm" in err
        assert f"ok rank={rank} world=2 local={rank} node=0 sum=3" in out, out


@pytest.mark.timeout(300)
def test_two_nodes_one_torchrun_each(tmp_path):
    common = _slurm(
        job_id=7002, ntasks=2, nnodes=2, job_nodelist="localhost,127.0.0.1", tasks_per_node="1(x2)"
    )
    processes = []
    for node in range(2):
        env = clean_env(tmp_path, **common, **_slurm(procid=node, localid=0, nodeid=node))
        argv = ["launch", "--cpu", "--num_processes", "2", str(WORKERS / "rank_check.py"), "2"]
        processes.append(start(argv, env, tmp_path))
    results = finish(processes, timeout=240)
    for node, (code, out, err) in enumerate(results):
        assert code == 0, out + err
        assert f"ok rank={node} world=2 local=0 node={node} sum=3" in out, out


def test_outside_an_allocation_is_a_clear_error(tmp_path):
    (tmp_path / "x.py").write_text("raise SystemExit(3)\n")
    argv = ["launch", "--launcher", "slurm", "--cpu", "x.py"]
    ((code, out, err),) = finish([start(argv, clean_env(tmp_path), tmp_path)], timeout=60)
    assert code == 2, out + err
    assert len(err.strip().splitlines()) == 1 and "not inside a SLURM allocation" in err
