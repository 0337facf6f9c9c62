"""The sbatch examples' `accel launch` lines, planned (--dry_run) as node 1 of a 2-node allocation.

`srun` is replaced by a shim that runs its command once, with `--dry_run` added, under
the variables SLURM gives task 1; the plan must be SLURM's layout. (The real `srun` runs
the multi-CPU example in test_slurm_real.py.)
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import clean_env

EXAMPLES = Path(__file__).parents[2] / "docs" / "examples" / "slurm"
SHIM = '#!/bin/sh\ncmd=$1; sub=$2; shift 2; exec "$cmd" "$sub" --dry_run "$@"\n'

CASES = {
    "multi_cpu.sbatch": (
        {"nnodes": 1, "ntasks": 2, "nodeid": 0, "procid": 1, "localid": 1, "tasks_per_node": 2,
         "job_nodelist": "cpu01"},
        ["command: " + sys.executable + " -m accel.launchers.worker --script", "env: RANK=1",
         "env: WORLD_SIZE=2", "env: MASTER_ADDR=cpu01"],
    ),
    "multi_gpu.sbatch": (
        {"nnodes": 1, "ntasks": 1, "nodeid": 0, "procid": 0, "localid": 0, "tasks_per_node": 1,
         "job_nodelist": "gpu01", "gpus_on_node": 4},
        ["launcher: torchrun", "--nproc_per_node 4 --standalone"],
    ),
    "multi_node.sbatch": (
        {"nnodes": 2, "ntasks": 2, "nodeid": 1, "procid": 1, "localid": 0,
         "tasks_per_node": "1(x2)", "job_nodelist": "gpu-[1-2]", "gpus_on_node": 4},
        ["launcher: slurm", "--nproc_per_node 4 --nnodes 2 --node_rank 1 --master_addr gpu-1"],
    ),
    "fsdp.sbatch": (
        {"nnodes": 2, "ntasks": 2, "nodeid": 1, "procid": 1, "localid": 0,
         "tasks_per_node": "1(x2)", "job_nodelist": "node[07-08]", "gpus_on_node": 8},
        ["launcher: slurm", "--nproc_per_node 8 --nnodes 2 --node_rank 1 --master_addr node07",
         "env: ACCEL_DISTRIBUTED_TYPE=FSDP"],
    ),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(CASES))
def test_example_plans_the_slurm_layout(name, tmp_path):
    slurm, expected = CASES[name]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text(SHIM)
    (bin_dir / "srun").chmod(0o755)
    env = clean_env(tmp_path, SLURM_JOB_ID="31", CUDA_VISIBLE_DEVICES="0,1,2,3,4,5,6,7")
    env.update({f"SLURM_{k.upper()}": str(v) for k, v in slurm.items()})
    env["PATH"] = os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent), env["PATH"]])
    done = subprocess.run(
        ["bash", str(EXAMPLES / name)], cwd=EXAMPLES.parents[2], env=env,
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    for text in expected:
        assert text in done.stdout, (text, done.stdout)
