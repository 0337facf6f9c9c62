"""Every row of :mod:`accel.catalog` is served by the distribution it names, with every
first-party plugin installed (the workspace); and the lists derived from it agree."""

from __future__ import annotations

import importlib
import importlib.metadata

import pytest
from accel import catalog
from accel.plugins import registry
from accel.plugins.manager import get_plugin_manager


def _distribution(module_name: str) -> str:
    """The distribution whose ``accel`` entry point lives in ``module_name``'s top-level package
    (accel-core for ``accel``): packages_distributions() does not see editable installs."""
    top = module_name.split(".")[0]
    if top == "accel":
        return catalog.CORE
    owners = {
        ep.dist.name
        for ep in importlib.metadata.entry_points(group="accel")
        if ep.value.split(".")[0].split(":")[0] == top
    }
    assert len(owners) == 1, f"{module_name}: {owners}"
    return owners.pop()


def _package(row: catalog.Provided) -> str:
    return row.package.split("[")[0]  # "accel-trackers[wandb]": the extra only adds the library


@pytest.mark.parametrize("name", [n for n, r in catalog.DISTRIBUTED_TYPES.items() if n != "NO"])
def test_distributed_type_is_served_by_its_package(name):
    backend = registry.backends()[name]
    assert _distribution(backend.__module__) == _package(catalog.DISTRIBUTED_TYPES[name])


@pytest.mark.parametrize("name", list(catalog.PRECISIONS))
def test_precision_is_served_by_its_package(name):
    precision = registry.precisions()[name]
    assert _distribution(precision.__module__) == _package(catalog.PRECISIONS[name])


@pytest.mark.parametrize("name", list(catalog.TRACKERS))
def test_tracker_is_served_by_its_package(name):
    tracker = registry.trackers()[name]
    assert _distribution(tracker.__module__) == _package(catalog.TRACKERS[name])


@pytest.mark.parametrize("name", list(catalog.QUANTIZERS))
def test_quantizer_is_served_by_its_package(name):
    quantizer = registry.quantizers()[name]
    assert _distribution(quantizer.__module__) == _package(catalog.QUANTIZERS[name])


def test_config_sections_are_declared_by_their_packages():
    owners: dict[str, str] = {}
    for plugin in get_plugin_manager().get_plugins():
        declare = getattr(plugin, "accel_config_sections", None)
        if declare is None:
            continue
        for key in declare() or {}:
            owners[key] = _distribution(getattr(plugin, "__name__", type(plugin).__module__))
    expected = {name: _package(row) for name, row in catalog.CONFIG_SECTIONS.items()}
    assert {key: owners.get(key) for key in expected} == expected


@pytest.mark.parametrize("name", list(catalog.EXPORTS))
def test_export_is_provided_by_its_package(name):
    module, _, attribute = registry.exports()[name].partition(":")
    assert _distribution(module) == _package(catalog.EXPORTS[name])
    assert hasattr(importlib.import_module(module), attribute)


def test_enums_and_config_choices_are_the_catalog():
    from accel.config.core_options import DYNAMO_BACKENDS, MULTI_DEVICE_TYPES
    from accel.types import DistributedType, DynamoBackend, LoggerType, PrecisionType
    from accel_ddp.backend import DDPBackend

    assert [t.value for t in DistributedType if t.name != "TPU"] == list(catalog.DISTRIBUTED_TYPES)
    assert PrecisionType.list() == list(catalog.PRECISIONS)
    assert DynamoBackend.list() == list(DYNAMO_BACKENDS) == list(catalog.DYNAMO_BACKENDS)
    assert LoggerType.list() == ["all", *catalog.TRACKERS]
    assert (
        set(DDPBackend.distributed_types) == MULTI_DEVICE_TYPES == set(catalog.DATA_PARALLEL_TYPES)
    )


def test_strategies_choose_the_catalog_types_with_the_catalog_flags():
    """The three strategies' ``--use_*`` flags and types are the catalog's, not a copy."""
    from accel_deepspeed.config import DEEPSPEED_STRATEGY
    from accel_fsdp.config import FSDP_STRATEGY
    from accel_megatron.config import MEGATRON_STRATEGY

    found = {
        s.flag: s.distributed_type for s in (FSDP_STRATEGY, DEEPSPEED_STRATEGY, MEGATRON_STRATEGY)
    }
    assert found == catalog.STRATEGY_FLAGS
    assert set(found.values()) == set(catalog.STRATEGY_TYPES)


@pytest.mark.parametrize("strategy", list(catalog.FSDP_SHARDING_STRATEGIES))
def test_fsdp_sharding_strategies_are_the_catalog(strategy):
    """accel-fsdp's choices and ``accel to-fsdp2``'s mapping read the catalog's one table."""
    from accel_cli.to_fsdp2 import RESHARD_AFTER_FORWARD, convert_config_to_fsdp2
    from accel_fsdp.config import FSDP_SECTION, FullyShardedDataParallelPlugin

    frees = catalog.FSDP_SHARDING_STRATEGIES[strategy]
    choices = {o.name: o.choices for o in FSDP_SECTION.options}["fsdp_sharding_strategy"]
    assert tuple(choices) == tuple(catalog.FSDP_SHARDING_STRATEGIES)
    assert RESHARD_AFTER_FORWARD is catalog.FSDP_SHARDING_STRATEGIES
    plugin = FullyShardedDataParallelPlugin(sharding_strategy=strategy)
    assert plugin.reshard_after_forward is frees
    converted, _ = convert_config_to_fsdp2({"fsdp_config": {"fsdp_sharding_strategy": strategy}})
    assert converted["fsdp_config"]["fsdp_reshard_after_forward"] is frees
