"""The Accelerator's process facts and helpers are written-out members over its components."""

from __future__ import annotations

import inspect

import pytest
from accel import Accelerator
from accel.backends import BackendContext
from accel.state import AcceleratorState, PartialState


@pytest.fixture
def accelerator():
    AcceleratorState._reset_state()
    yield Accelerator(cpu=True)
    AcceleratorState._reset_state()


def test_accelerator_process_facts_are_the_backend_contexts(accelerator):
    context = accelerator.backend_context
    for name in (
        "device",
        "distributed_type",
        "num_processes",
        "process_index",
        "local_process_index",
        "is_main_process",
        "is_local_main_process",
        "is_last_process",
        "use_distributed",
        "mixed_precision",
        "parallelism_config",
        "torch_device_mesh",
        "split_batches",
        "even_batches",
        "gradient_accumulation_steps",
        "sync_gradients",
    ):
        assert getattr(accelerator, name) == getattr(context, name), name
        member = inspect.getattr_static(Accelerator, name)
        assert isinstance(member, property) and member.__doc__, name  # what editors follow
        assert (
            member.__doc__ == getattr(BackendContext, name).__doc__ or name == "mixed_precision"
        ), name


def test_accelerator_writes_go_to_the_shared_components(accelerator):
    accelerator.even_batches = False
    assert accelerator.dataloader_config.even_batches is False
    assert accelerator.backend_context.even_batches is False
    accelerator.gradient_accumulation_steps = 4
    assert accelerator.backend_context.gradient_accumulation_steps == 4
    accelerator.sync_gradients = False
    assert accelerator.gradient_state.sync_gradients is False
    accelerator.rng_types = ["generator"]
    assert accelerator.backend_context.rng_types == ["generator"]


def test_process_helpers_are_the_states(accelerator):
    ran = []
    accelerator.on_local_process(lambda: ran.append("idx"), local_process_idx=0)()
    accelerator.on_main_process(lambda: ran.append("main"))()
    accelerator.on_process(process_index=1)(lambda: ran.append("rank 1"))()
    with accelerator.main_process_first():
        ran.append("first")
    assert ran == ["idx", "main", "first"]
    assert Accelerator.on_process.__doc__ == PartialState.on_process.__doc__
    assert inspect.signature(Accelerator.on_local_process) == inspect.signature(
        PartialState.on_local_process
    )


def test_every_dataloader_configuration_field_is_read_through_the_accelerator():
    from accel import DataLoaderConfiguration

    AcceleratorState._reset_state()
    config = DataLoaderConfiguration(
        dispatch_batches=False,
        use_seedable_sampler=True,
        non_blocking=True,
        use_stateful_dataloader=True,
    )
    try:
        accelerator = Accelerator(cpu=True, dataloader_config=config)
        for name in ("dispatch_batches", "use_seedable_sampler", "non_blocking"):
            assert getattr(accelerator, name) is getattr(config, name), name
            with pytest.raises(AttributeError):  # read-only, as in Accelerate
                setattr(accelerator, name, None)
        assert accelerator.use_stateful_dataloader is True
        config.non_blocking = False  # reads the live configuration
        assert accelerator.non_blocking is False
    finally:
        AcceleratorState._reset_state()


def test_the_fsdp_plugin_of_the_state_is_assignable():
    # transformers' FSDP tests set ``accelerator.state.fsdp_plugin`` after building the Accelerator.
    from accel import FullyShardedDataParallelPlugin

    AcceleratorState._reset_state()
    try:
        accelerator = Accelerator(cpu=True)
        assert accelerator.state.fsdp_plugin is None
        plugin = FullyShardedDataParallelPlugin()
        accelerator.state.fsdp_plugin = plugin
        assert AcceleratorState().fsdp_plugin is plugin  # shared by every handle
        assert accelerator.state.plugins["fsdp_plugin"] is plugin
        accelerator.state.fsdp_plugin = None
        assert AcceleratorState().fsdp_plugin is None
    finally:
        AcceleratorState._reset_state()
