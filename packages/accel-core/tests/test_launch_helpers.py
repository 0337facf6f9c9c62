"""Accelerate's launch helpers over accel's launch plan (``accel.utils.prepare_multi_gpu_env``)."""

from __future__ import annotations

import argparse

import pytest


@pytest.fixture(autouse=True)
def no_config(tmp_path, monkeypatch):
    monkeypatch.setenv("ACCEL_CONFIG_DIR", str(tmp_path / "config"))


def _args(**overrides):
    """A namespace like the one ``accelerate launch`` builds for a two-GPU run."""
    values = dict(
        num_processes=2,
        num_machines=1,
        machine_rank=0,
        main_process_ip=None,
        main_process_port=29555,
        mixed_precision="bf16",
        gpu_ids="0,1",
        debug=True,
        dynamo_backend="no",
        use_fsdp=False,
        use_deepspeed=False,
        use_megatron_lm=False,
        module=False,
        no_python=False,
        training_script="train.py",
        training_script_args=["--lr", "1"],
    )
    values.update(overrides)
    return argparse.Namespace(**values)


def test_prepare_multi_gpu_env_is_the_torchrun_plans_environment(monkeypatch):
    import json

    from accel.utils import prepare_multi_gpu_env

    monkeypatch.setenv("SOMETHING_ELSE", "kept")
    monkeypatch.setenv("ACCEL_MIXED_PRECISION", "fp16")  # the arguments decide, as in Accelerate
    args = _args()
    env = prepare_multi_gpu_env(args)
    expected = {
        "SOMETHING_ELSE": "kept",
        "ACCEL_DISTRIBUTED_TYPE": "MULTI_GPU",
        "ACCEL_MIXED_PRECISION": "bf16",
        "ACCELERATE_MIXED_PRECISION": "bf16",
        "ACCEL_DEBUG_MODE": "true",
        "ACCELERATE_DEBUG_MODE": "true",
        "ACCEL_USE_CPU": "false",
        "ACCELERATE_USE_CPU": "false",
        "ACCEL_DOWNCAST_BF16": "no",
        "ACCELERATE_DOWNCAST_BF16": "no",
        "ACCEL_CPU_AFFINITY": "false",
        "ACCELERATE_CPU_AFFINITY": "false",
        "CUDA_VISIBLE_DEVICES": "0,1",
    }
    assert {k: env.get(k) for k in expected} == expected
    launched = json.loads(env["ACCEL_LAUNCH_CONFIG"])
    assert {k: launched.get(k) for k in LAUNCHED} == LAUNCHED
    assert launched["dynamo_config"]["dynamo_backend"] == "NO"
    assert args.nproc_per_node == "2"  # set on args for torchrun, as Accelerate does


#: What the two-GPU arguments of :func:`_args` put in ``ACCEL_LAUNCH_CONFIG``.
LAUNCHED = {
    "distributed_type": "MULTI_GPU",
    "num_processes": 2,
    "nproc_per_node": 2,
    "num_machines": 1,
    "machine_rank": 0,
    "main_process_port": 29555,
    "mixed_precision": "bf16",
    "gpu_ids": "0,1",
    "debug": True,
    "use_cpu": False,
    "rdzv_backend": "static",
}


def test_prepare_multi_gpu_env_passes_plugin_arguments_to_their_plugin():
    pytest.importorskip("accel_fsdp")
    import json

    from accel.utils import prepare_multi_gpu_env

    env = prepare_multi_gpu_env(
        _args(
            use_fsdp=True,
            fsdp_sharding_strategy="SHARD_GRAD_OP",
            fsdp_cpu_ram_efficient_loading=True,
            fsdp_transformer_layer_cls_to_wrap="BertLayer",
        )
    )
    assert env["ACCELERATE_USE_FSDP"] == "true"
    assert env["ACCEL_DISTRIBUTED_TYPE"] == "FSDP"
    assert env["FSDP_TRANSFORMER_CLS_TO_WRAP"] == "BertLayer"
    launched = json.loads(env["ACCEL_LAUNCH_CONFIG"])
    assert launched["fsdp_config"]["fsdp_sharding_strategy"] == "SHARD_GRAD_OP"


def test_prepare_multi_gpu_env_rejects_module_with_no_python():
    from accel.utils import prepare_multi_gpu_env

    with pytest.raises(ValueError, match="--module and --no_python"):
        prepare_multi_gpu_env(_args(module=True, no_python=True))


@pytest.mark.parametrize("port", [0, "0"])
def test_prepare_multi_gpu_env_port_0_picks_a_free_port(port):
    """``main_process_port`` 0 asks for a free port, chosen and set on ``args`` (Accelerate's rule)."""
    import json
    import socket

    from accel.utils import prepare_multi_gpu_env

    args = _args(main_process_port=port)
    env = prepare_multi_gpu_env(args)
    chosen = args.main_process_port
    assert isinstance(chosen, int) and 1 <= chosen <= 65535
    assert json.loads(env["ACCEL_LAUNCH_CONFIG"])["main_process_port"] == chosen
    with socket.socket() as sock:
        sock.bind(("", chosen))  # free: nothing listens there
    mapping = vars(_args(main_process_port=0))
    env = prepare_multi_gpu_env(mapping)
    assert json.loads(env["ACCEL_LAUNCH_CONFIG"])["main_process_port"] not in (0, None)


def test_prepare_multi_gpu_env_sets_torchrun_endpoint_arguments():
    """As Accelerate's, it sets the endpoint its torchrun call reads on ``args`` (strings)."""
    from accel.utils import prepare_multi_gpu_env

    args = _args(main_process_port=0)
    prepare_multi_gpu_env(args)
    assert args.master_port == str(args.main_process_port)

    several = dict(num_processes=4, num_machines=2, machine_rank=1, main_process_ip="10.0.0.1")
    args = _args(**several)
    prepare_multi_gpu_env(args)
    assert (args.nproc_per_node, args.nnodes, args.node_rank) == ("2", "2", 1)
    assert args.rdzv_endpoint == "10.0.0.1:29555"
    assert not hasattr(args, "master_port")

    args = _args(**several, same_network=True)
    prepare_multi_gpu_env(args)
    assert (args.master_addr, args.master_port) == ("10.0.0.1", "29555")
    assert not hasattr(args, "rdzv_endpoint")
