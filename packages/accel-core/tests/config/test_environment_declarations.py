"""Every ``ACCEL_*`` / ``ACCELERATE_*`` variable is read through its declaration
(``Option.from_env``): Accelerate's spelling works everywhere, an empty value gets one answer
and a bad value one wording, on the launch side and in the worker alike."""

from __future__ import annotations

import logging

import pytest
from accel.config.resolution import resolve
from accel.errors import ConfigError
from accel.kwargs import InitProcessGroupKwargs, TorchDynamoPlugin


@pytest.fixture(autouse=True)
def _clean(monkeypatch):
    for name in ("ACCEL_DYNAMO_USE_DYNAMIC", "ACCEL_LOG_LEVEL", "ACCEL_NUM_PROCESSES"):
        monkeypatch.delenv(name, raising=False)


def test_accelerate_spelling_reaches_the_readers_that_missed_it(monkeypatch):
    monkeypatch.setenv("ACCELERATE_DYNAMO_USE_DYNAMIC", "true")
    assert TorchDynamoPlugin().dynamic is True  # read os.environ["ACCEL_..."] by hand before

    monkeypatch.setenv("ACCELERATE_LOG_LEVEL", "DEBUG")  # Accelerate's own variable
    from accel.logging import get_logger

    root = logging.getLogger().level
    try:
        assert get_logger("accel.test_env_spelling").logger.level == logging.DEBUG
    finally:
        logging.getLogger().setLevel(root)

    monkeypatch.setenv("ACCELERATE_NUM_PROCESSES", "3")  # the launch side's environment layer
    resolved = resolve(use_config_file=False)
    assert resolved["num_processes"] == 3
    assert str(resolved.source("num_processes")).endswith("ACCELERATE_NUM_PROCESSES")


def test_one_wording_for_a_bad_value_in_a_worker_and_at_launch(monkeypatch):
    monkeypatch.setenv("ACCEL_TIMEOUT", "soon")
    with pytest.raises(ConfigError) as worker:
        InitProcessGroupKwargs()
    assert str(worker.value) == (
        "environment variable ACCEL_TIMEOUT (timeout)='soon' is not an integer: "
        "use a whole number >= 1"
    )
    monkeypatch.setenv("ACCEL_DYNAMO_USE_FULLGRAPH", "maybe")
    with pytest.raises(ConfigError) as launch:
        resolve(use_config_file=False)
    with pytest.raises(ConfigError) as in_worker:
        TorchDynamoPlugin()
    assert (
        str(launch.value)
        == str(in_worker.value)
        == (
            "environment variable ACCEL_DYNAMO_USE_FULLGRAPH (dynamo_use_fullgraph)='maybe' "
            "is not a boolean: use true or false"
        )
    )


def test_an_empty_value_gets_one_answer_everywhere(monkeypatch):
    """Empty is a value, converted like any other: refused for a boolean, at launch (which
    skipped it) and in the worker (which read it as false) alike; an empty list is no names."""
    monkeypatch.setenv("ACCEL_DYNAMO_USE_FULLGRAPH", "")
    with pytest.raises(ConfigError, match="ACCEL_DYNAMO_USE_FULLGRAPH .*='' is not a boolean"):
        resolve(use_config_file=False)
    with pytest.raises(ConfigError, match="ACCEL_DYNAMO_USE_FULLGRAPH .*='' is not a boolean"):
        TorchDynamoPlugin()
    monkeypatch.setenv("PARALLELISM_CONFIG_TP_SIZE", "")
    from accel import ParallelismConfig

    with pytest.raises(ConfigError, match="PARALLELISM_CONFIG_TP_SIZE .*='' is not an integer"):
        ParallelismConfig()


def test_accelerates_public_parsers_use_the_one_table(monkeypatch):
    from accel.utils import parse_flag_from_env, str_to_bool

    assert str_to_bool("t") == 1 and str_to_bool("OFF", to_bool=True) is False
    with pytest.raises(ValueError, match="is not a boolean"):
        str_to_bool("maybe")
    monkeypatch.setenv("ACCELERATE_USE_CPU", "y")  # declared: read with its Accelerate spelling
    assert parse_flag_from_env("ACCEL_USE_CPU") is True
