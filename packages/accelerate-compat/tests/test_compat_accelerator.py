"""``accelerate.Accelerator``: accel's Accelerator with Accelerate's device rule for FSDP.

Accelerate applies FSDP only on accelerator devices; on CPU processes the run stays
data-parallel and ``state.fsdp_plugin`` is None (what transformers' ``Trainer`` reads to
decide whether FSDP is on). ``accel.Accelerator`` shards on CPU. The two-process Trainer
run against Accelerate's own numbers is integration-tests/reference (``trainer_fsdp_2proc``).
"""

from __future__ import annotations

import logging

import accel
import accelerate
from accel.utils import DistributedType, FullyShardedDataParallelPlugin


def test_accelerate_accelerator_is_accels_with_accelerates_rule():
    assert issubclass(accelerate.Accelerator, accel.Accelerator)
    assert accelerate.Accelerator.fsdp_on_cpu is False
    assert accel.Accelerator.fsdp_on_cpu is True
    from accelerate import Accelerator

    assert Accelerator is accelerate.Accelerator


def test_fsdp_plugin_on_cpu_runs_data_parallel_as_in_accelerate(caplog):
    with caplog.at_level(logging.WARNING, logger="accel.state"):
        accelerator = accelerate.Accelerator(cpu=True, fsdp_plugin=FullyShardedDataParallelPlugin())
    assert accelerator.distributed_type == DistributedType.NO
    assert accelerator.state.fsdp_plugin is None
    assert "FSDP is not applied on CPU processes" in caplog.text


def test_launcher_fsdp_on_cpu_runs_data_parallel_as_in_accelerate(monkeypatch):
    monkeypatch.setenv("ACCEL_DISTRIBUTED_TYPE", "FSDP")
    accelerator = accelerate.Accelerator(cpu=True)
    assert accelerator.distributed_type == DistributedType.NO
    assert accelerator.state.fsdp_plugin is None


def test_accels_own_accelerator_shards_on_cpu():
    accelerator = accel.Accelerator(cpu=True, fsdp_plugin=FullyShardedDataParallelPlugin())
    assert accelerator.distributed_type == DistributedType.FSDP
    assert accelerator.state.fsdp_plugin is not None


def test_accel_fsdp_on_cpu_makes_accelerate_accelerator_shard(monkeypatch):
    monkeypatch.setenv("ACCEL_FSDP_ON_CPU", "1")
    accelerator = accelerate.Accelerator(cpu=True, fsdp_plugin=FullyShardedDataParallelPlugin())
    assert accelerator.distributed_type == DistributedType.FSDP
