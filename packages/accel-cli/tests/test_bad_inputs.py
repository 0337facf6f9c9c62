"""Bad input: `accel` exits 2 with one line naming the key or value and the fix, no traceback."""

from __future__ import annotations

import pytest

GOOD = "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_CPU\nnum_processes: 2\n"

# (id, argv, files {name: text}, env, substrings the one error line must contain)
CASES = [
    ("missing-script", ["launch", "nope.py"], {}, {}, ["nope.py", "does not exist"]),
    ("no-script", ["launch", "--cpu"], {}, {}, ["script to run is missing"]),
    ("script-is-dir", ["launch", "sub"], {"sub/x.txt": ""}, {}, ["is a directory"]),
    (
        "nproc-not-int",
        ["launch", "--num_processes", "abc", "s.py"],
        {},
        {},
        ["num_processes", "'abc'", "whole number"],
    ),
    (
        "nproc-zero",
        ["launch", "--num_processes", "0", "s.py"],
        {},
        {},
        ["num_processes", "'0' must be a whole number >= 1"],
    ),
    ("nproc-negative", ["launch", "--num_processes=-1", "s.py"], {}, {}, ["num_processes", ">= 1"]),
    (
        "precision-unknown",
        ["launch", "--mixed_precision", "fp64", "s.py"],
        {},
        {},
        ["mixed_precision", "fp64", "no, fp16, bf16 or fp8"],
    ),
    (
        "precision-typo",
        ["launch", "--mixed_precision", "bf61", "s.py"],
        {},
        {},
        ["did you mean bf16"],
    ),
    (
        "port-range",
        ["launch", "--main_process_port", "70000", "s.py"],
        {},
        {},
        ["main_process_port", "70000", "1 to 65535"],
    ),
    (
        "port-text",
        ["launch", "--main_process_port", "http", "s.py"],
        {},
        {},
        ["main_process_port", "'http'"],
    ),
    (
        "rank-too-big",
        [
            "launch",
            "--num_machines",
            "2",
            "--machine_rank",
            "2",
            "--main_process_ip",
            "127.0.0.1",
            "s.py",
        ],
        {},
        {},
        ["machine_rank 2", "num_machines"],
    ),
    (
        "multinode-no-ip",
        ["launch", "--num_machines", "2", "s.py"],
        {},
        {},
        ["main_process_ip", "--main_process_ip"],
    ),
    (
        "not-divisible",
        [
            "launch",
            "--num_machines",
            "2",
            "--num_processes",
            "3",
            "--main_process_ip",
            "127.0.0.1",
            "s.py",
        ],
        {},
        {},
        ["divisible", "--nproc_per_node"],
    ),
    (
        "cpu-and-multi-gpu",
        ["launch", "--cpu", "--multi_gpu", "s.py"],
        {},
        {},
        ["--cpu", "--multi_gpu", "contradict"],
    ),
    (
        "use-fsdp-absent",
        ["launch", "--use_fsdp", "s.py"],
        {},
        {},
        ["--use_fsdp", "accel-fsdp", "pip install"],
    ),
    (
        "fsdp-flag-absent",
        ["launch", "--fsdp_sharding_strategy", "1", "s.py"],
        {},
        {},
        ["--fsdp_sharding_strategy", "accel-fsdp"],
    ),
    ("deepspeed-absent", ["launch", "--use_deepspeed", "s.py"], {}, {}, ["accel-deepspeed"]),
    ("ray-absent", ["launch", "--ray", "s.py"], {}, {}, ["--ray", "accel-ray", "pip install"]),
    (
        "ray-flag-absent",
        ["launch", "--ray_address", "127.0.0.1:6379", "s.py"],
        {},
        {},
        ["--ray_address", "accel-ray"],
    ),
    ("ft-absent", ["launch", "--ft", "s.py"], {}, {}, ["--ft", "accel-ft", "pip install"]),
    (
        "zero-stage-absent",
        ["launch", "--zero_stage=3", "s.py"],
        {},
        {},
        ["--zero_stage", "accel-deepspeed"],
    ),
    ("megatron-absent", ["launch", "--use_megatron_lm", "s.py"], {}, {}, ["accel-megatron"]),
    (
        "fp8-flag-absent",
        ["launch", "--fp8_backend", "te", "s.py"],
        {},
        {},
        ["--fp8_backend", "accel-fp8"],
    ),
    (
        "fp8-precision-absent",
        ["launch", "--mixed_precision", "fp8", "s.py"],
        {},
        {},
        ["mixed_precision fp8", "accel-fp8"],
    ),
    (
        "unknown-option",
        ["launch", "--num_procs", "2", "s.py"],
        {},
        {},
        ["--num_procs", "did you mean --num_processes"],
    ),
    ("gpu-ids", ["launch", "--gpu_ids", "a,b", "s.py"], {}, {}, ["gpu_ids", "'a,b'", "0,1"]),
    ("gpu-ids-twice", ["launch", "--gpu_ids", "0,0", "s.py"], {}, {}, ["gpu_ids", "twice"]),
    (
        "rdzv-backend",
        ["launch", "--rdzv_backend", "zookeeper", "s.py"],
        {},
        {},
        ["rdzv_backend", "static, c10d"],
    ),
    ("max-restarts", ["launch", "--max_restarts=-1", "s.py"], {}, {}, ["max_restarts", ">= 0"]),
    (
        "dynamo-backend",
        ["launch", "--dynamo_backend", "turbo", "s.py"],
        {},
        {},
        ["dynamo_backend", "'turbo'", "INDUCTOR"],
    ),
    (
        "grad-accum",
        ["launch", "--gradient_accumulation_steps", "0", "s.py"],
        {},
        {},
        ["gradient_accumulation_steps", ">= 1"],
    ),
    (
        "module-and-no-python",
        ["launch", "-m", "--no_python", "x"],
        {},
        {},
        ["--module and --no_python"],
    ),
    (
        "module-missing",
        ["launch", "-m", "no_such_module_xyz"],
        {},
        {},
        ["no module named 'no_such_module_xyz'"],
    ),
    (
        "nproc-conflict",
        ["launch", "--nproc_per_node", "2", "--num_processes", "3", "s.py"],
        {},
        {},
        ["nproc_per_node 2", "num_processes is 3"],
    ),
    (
        "launcher-unknown",
        ["launch", "--launcher", "slurmish", "s.py"],
        {},
        {},
        ["--launcher slurmish", "simple", "torchrun"],
    ),
    (
        "config-missing",
        ["launch", "--config_file", "missing.yaml", "s.py"],
        {},
        {},
        ["missing.yaml", "does not exist"],
    ),
    (
        "yaml-malformed",
        ["launch", "--config_file", "c.yaml", "s.py"],
        {"c.yaml": "num_processes: [2\nuse_cpu: true\n"},
        {},
        ["c.yaml:", "malformed YAML", "fix the syntax"],
    ),
    (
        "json-malformed",
        ["launch", "--config_file", "c.json", "s.py"],
        {"c.json": '{"num_processes": 2,}'},
        {},
        ["c.json:1:", "malformed JSON"],
    ),
    (
        "unknown-key",
        ["launch", "--config_file", "c.yaml", "s.py"],
        {"c.yaml": GOOD + "num_process: 2\n"},
        {},
        ["c.yaml", "'num_process'", "did you mean num_processes"],
    ),
    (
        "wrong-type",
        ["launch", "--config_file", "c.yaml", "s.py"],
        {"c.yaml": "num_processes: two\n"},
        {},
        ["c.yaml", "num_processes", "'two'"],
    ),
    (
        "bool-type",
        ["launch", "--config_file", "c.yaml", "s.py"],
        {"c.yaml": "use_cpu: maybe\n"},
        {},
        ["c.yaml", "use_cpu", "true or false"],
    ),
    (
        "precision-in-file",
        ["launch", "--config_file", "c.yaml", "s.py"],
        {"c.yaml": "mixed_precision: fp32\n"},
        {},
        ["c.yaml", "mixed_precision", "'fp32'"],
    ),
    (
        "fsdp-type-absent",
        ["launch", "--config_file", "c.yaml", "s.py"],
        {"c.yaml": "distributed_type: FSDP\nnum_processes: 2\n"},
        {},
        ["c.yaml", "distributed_type FSDP", "accel-fsdp"],
    ),
    (
        "fsdp-section-absent",
        ["launch", "--config_file", "c.yaml", "s.py"],
        {"c.yaml": GOOD + "fsdp_config:\n  fsdp_offload_params: true\n"},
        {},
        ["fsdp_config", "accel-fsdp"],
    ),
    (
        "not-a-mapping",
        ["launch", "--config_file", "c.yaml", "s.py"],
        {"c.yaml": "- a\n- b\n"},
        {},
        ["c.yaml", "mapping"],
    ),
    (
        "empty-file",
        ["launch", "--config_file", "c.yaml", "s.py"],
        {"c.yaml": "\n"},
        {},
        ["c.yaml", "empty"],
    ),
    (
        "no-with-many",
        ["launch", "--config_file", "c.yaml", "s.py"],
        {"c.yaml": "distributed_type: 'NO'\nnum_processes: 2\n"},
        {},
        ["distributed_type NO (file c.yaml) runs one process", "MULTI_CPU"],
    ),
    (
        "launch-key-in-file",
        ["launch", "--config_file", "c.yaml", "s.py"],
        {"c.yaml": "max_restarts: 3\n"},
        {},
        ["max_restarts", "cannot be set in a config file", "--max_restarts"],
    ),
    (
        "sagemaker-key",
        ["launch", "--config_file", "c.yaml", "s.py"],
        {"c.yaml": "region: us-east-1\n"},
        {},
        ["region", "AMAZON_SAGEMAKER"],
    ),
    (
        "dynamo-section-key",
        ["launch", "--config_file", "c.yaml", "s.py"],
        {"c.yaml": "dynamo_config:\n  dynamo_backnd: INDUCTOR\n"},
        {},
        ["dynamo_config", "did you mean dynamo_backend"],
    ),
    (
        "sagemaker-launch",
        ["launch", "--config_file", "c.yaml", "s.py"],
        {"c.yaml": "compute_environment: AMAZON_SAGEMAKER\n"},
        {},
        ["AMAZON_SAGEMAKER", "LOCAL_MACHINE"],
    ),
    (
        "env-nproc",
        ["launch", "s.py"],
        {},
        {"ACCEL_NUM_PROCESSES": "x"},
        ["ACCEL_NUM_PROCESSES", "num_processes", "'x'"],
    ),
    (
        "env-precision",
        ["launch", "s.py"],
        {},
        {"ACCEL_MIXED_PRECISION": "fp9"},
        ["ACCEL_MIXED_PRECISION", "'fp9'"],
    ),
    (
        "env-config-file",
        ["launch", "s.py"],
        {},
        {"ACCEL_CONFIG_FILE": "gone.yaml"},
        ["gone.yaml", "does not exist"],
    ),
    ("unknown-command", ["lunch", "s.py"], {}, {}, ["unknown command 'lunch'", "accel launch"]),
    ("show-bad-flag", ["config", "show", "--num_processes", "x"], {}, {}, ["num_processes", "'x'"]),
    (
        "update-missing",
        ["config", "update", "--config_file", "nope.yaml"],
        {},
        {},
        ["nope.yaml", "does not exist"],
    ),
    ("config-no-tty", ["config"], {}, {}, ["terminal", "--defaults"]),
    (
        "answers-bad",
        ["config", "--answers", "a.yaml", "--config_file", "o.yaml"],
        {"a.yaml": "mixed_precision: fp64\n"},
        {},
        ["mixed_precision", "'fp64'"],
    ),
    (
        "estimate-missing",
        ["estimate-memory", "no/such/model"],
        {},
        {},
        ["'no/such/model'", "config.json"],
    ),
    (
        "estimate-dtype",
        ["estimate-memory", "cfg.json", "--dtypes", "float64"],
        {"cfg.json": "{}"},
        {},
        ["--dtypes", "float64"],
    ),
    (
        "estimate-arch",
        ["estimate-memory", "cfg.json"],
        {"cfg.json": '{"model_type": "t9"}'},
        {},
        ["model_type 't9'", "transformers"],
    ),
    ("merge-missing", ["merge-weights", "nockpt", "out"], {}, {}, ["'nockpt'", "does not exist"]),
    ("merge-not-dcp", ["merge-weights", "d", "out"], {"d/a.txt": ""}, {}, ["no .metadata"]),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_exits_2_with_one_line(case, accel, tmp_path):
    _, argv, files, env, expected = case
    (tmp_path / "s.py").write_text("print('should not run')\n")
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    result = accel(*argv, env=env, timeout=60)
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert "should not run" not in result.stdout
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    for text in expected:
        assert text in lines[0], (text, lines[0])


def test_there_are_at_least_30_cases():
    assert len(CASES) >= 30
