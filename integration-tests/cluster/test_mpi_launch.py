"""`accel launch` with an MPI host file runs the job under Debian's Open MPI `mpirun`, for real."""

from __future__ import annotations

import shutil

import pytest

from .conftest import WORKERS, clean_env, finish, start

pytestmark = pytest.mark.skipif(
    shutil.which("mpirun") is None,
    reason="needs mpirun (Open MPI: apt-get install openmpi-bin, see .ci/setup.d/openmpi.sh)",
)


@pytest.mark.timeout(300)
def test_two_mpi_ranks_see_world_size_two(tmp_path):
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("# the sanity check of the seed, on one host\nlocalhost slots=2\n")
    argv = ["launch", "--cpu", "--num_processes", "2", "--mpirun_hostfile", str(hostfile)]
    argv += [str(WORKERS / "rank_check.py"), "2"]
    ((code, out, err),) = finish([start(argv, clean_env(tmp_path), tmp_path)], timeout=240)
    assert code == 0, out + err
    assert "launcher mpirun" in err
    lines = sorted(line for line in out.splitlines() if line.startswith("ok "))
    assert [line.split()[1:4] for line in lines] == [
        ["rank=0", "world=2", "local=0"],
        ["rank=1", "world=2", "local=1"],
    ], out
    assert all("sum=3" in line for line in lines)


def test_missing_hostfile_is_a_clear_error(tmp_path):
    argv = ["launch", "--cpu", "--num_processes", "2", "--mpirun_hostfile", "absent", "x.py"]
    (tmp_path / "x.py").write_text("raise SystemExit(3)\n")
    ((code, out, err),) = finish([start(argv, clean_env(tmp_path), tmp_path)], timeout=60)
    assert code == 2
    assert err.strip().splitlines() == [
        "accel launch: error: mpirun_config.mpirun_hostfile: absent does not exist; write a host "
        "file (one `host slots=N` or `host:N` per line) or fix the path given to --mpirun_hostfile"
    ]
