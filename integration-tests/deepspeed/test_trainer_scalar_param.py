"""transformers' Trainer(auto_find_batch_size=True) + DeepSpeed ZeRO-2 on a model with a 0-dim parameter.

2 real gloo processes through ``accel launch``: DeepSpeed's own ``initialize`` fails on a
0-dim parameter ("self.dim() cannot be 0 to view Float as Byte"); accel broadcasts it
itself. The model's forward raises out-of-memory for batches over 4 rows, so the Trainer
prepares the same module again at each smaller batch size (a new engine replacing the old).
See ``workers/trainer_scalar_param.py`` for the checks.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

pytest.importorskip("transformers")
pytest.importorskip("deepspeed")
from accel.testing.processes import accel_executable, clean_environment, run_command  # noqa: E402

HERE = Path(__file__).parent
REPO = HERE.parents[1]
pytestmark = pytest.mark.skipif(
    shutil.which(os.environ.get("CXX", "c++")) is None,
    reason=(
        "DeepSpeed JIT-builds its CPU communication op (shm_comm) with a C++ compiler: "
        "apt-get install g++ (see .ci/setup.d/deepspeed.sh)"
    ),
)


@pytest.mark.timeout(900)
def test_trainer_auto_find_batch_size_with_a_scalar_parameter(tmp_path):
    accel = accel_executable()
    if accel is None:
        pytest.skip("the accel command (accel-cli) is not installed")
    env = clean_environment(
        {
            "DS_ACCELERATOR": "cpu",
            "TORCH_EXTENSIONS_DIR": os.environ.get(
                "TORCH_EXTENSIONS_DIR", str(REPO / ".cache" / "torch_extensions")
            ),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "HF_HOME": str(tmp_path / "hf_home"),
        }
    )
    done = run_command(
        [
            accel,
            "launch",
            "--cpu",
            "--num_processes",
            "2",
            "--mixed_precision",
            "no",
            str(HERE / "workers" / "trainer_scalar_param.py"),
            str(tmp_path / "out"),
        ],
        env=env,
        timeout=840,
    )
    for rank in (0, 1):
        for check in (
            "trained at batch size 4",
            "temperature broadcast and trained",
            "one engine",
            "same weights as with a shape-(1,) temperature",
        ):
            assert f"rank{rank} ok {check}" in done.stdout, done.stdout[-3000:]


CONFIG_ERROR = """
import sys, torch
from accel import Accelerator, DeepSpeedPlugin
from accel.errors import ConfigError
stage, clipping = int(sys.argv[1]), float(sys.argv[2])
model = torch.nn.Linear(2, 2)
model.scale = torch.nn.Parameter(torch.tensor(2.0))
accelerator = Accelerator(
    cpu=True, deepspeed_plugin=DeepSpeedPlugin(zero_stage=stage, gradient_clipping=clipping)
)
try:
    loader = torch.utils.data.DataLoader(torch.zeros(8, 2), batch_size=4)
    accelerator.prepare(model, torch.optim.AdamW(model.parameters()), loader)
except ConfigError as exc:
    print("ConfigError:", exc)
"""


@pytest.mark.timeout(300)
@pytest.mark.parametrize(
    ("stage", "clipping", "says"),
    [
        ("3", "1.0", "DeepSpeed ZeRO-3 cannot partition zero-dimensional parameters (scale)"),
        ("0", "1.0", "DeepSpeed without ZeRO cannot clip the gradients of zero-dimensional"),
    ],
)
def test_stages_deepspeed_cannot_run_with_a_scalar_parameter_say_so(
    tmp_path, stage, clipping, says
):
    import subprocess
    import sys

    env = clean_environment({"DS_ACCELERATOR": "cpu", "TORCH_EXTENSIONS_DIR": str(tmp_path)})
    done = subprocess.run(
        [sys.executable, "-c", CONFIG_ERROR, stage, clipping],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("ConfigError:")]
    assert len(lines) == 1 and says in lines[0], done.stdout[-2000:] + done.stderr[-2000:]
    assert "shape (1,)" in lines[0]
