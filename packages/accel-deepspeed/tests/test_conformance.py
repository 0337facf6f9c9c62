"""accel-deepspeed passes the backend conformance kit: ZeRO-2 on DeepSpeed's CPU accelerator.

The workers start through ``accel launch`` with a config file, as a user's job would.
DeepSpeed JIT-builds C++ ops on first use; they are kept in ``$TORCH_EXTENSIONS_DIR``
(default: ``.cache/torch_extensions`` of the repository), so later runs reuse them.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from accel.testing import BackendConformance

REPO = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.skipif(
    shutil.which(os.environ.get("CXX", "c++")) is None,
    reason=(
        "DeepSpeed JIT-builds its CPU ops (shm_comm, cpu_adam) with a C++ compiler: "
        "apt-get install g++ (see .ci/setup.d/deepspeed.sh)"
    ),
)


class TestDeepSpeedZero2Conformance(BackendConformance):
    """ZeRO-2 in fp32 (gradient clipping out of reach, so plain SGD is the reference)."""

    backend_name = "deepspeed"
    config_file = """\
compute_environment: LOCAL_MACHINE
distributed_type: DEEPSPEED
deepspeed_config:
  zero_stage: 2
  gradient_clipping: 1000.0
  offload_optimizer_device: none
  offload_param_device: none
  zero3_init_flag: false
mixed_precision: 'no'
num_machines: 1
num_processes: 2
use_cpu: true
"""
    env = {
        "DS_ACCELERATOR": "cpu",
        "TORCH_EXTENSIONS_DIR": os.environ.get(
            "TORCH_EXTENSIONS_DIR", str(REPO / ".cache" / "torch_extensions")
        ),
    }
    # one process is left to integration-tests/deepspeed (workers/single.py): a DeepSpeed
    # start costs most of this check's time
    world_sizes = (2,)
    timeout = 400
