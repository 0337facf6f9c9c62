"""Kwargs handlers of accel.kwargs: to_kwargs / to_dict."""

from __future__ import annotations

import os

from accel import TorchDynamoPlugin
from accel.utils import GradScalerKwargs


def test_dynamo_to_kwargs_keeps_values_from_the_environment(monkeypatch):
    monkeypatch.setenv("ACCEL_DYNAMO_BACKEND", "INDUCTOR")
    monkeypatch.setenv("ACCEL_DYNAMO_MODE", "max-autotune")
    monkeypatch.setenv("ACCEL_DYNAMO_USE_FULLGRAPH", "true")
    monkeypatch.setenv("ACCEL_DYNAMO_USE_REGIONAL_COMPILATION", "true")
    kwargs = TorchDynamoPlugin().to_kwargs()
    assert kwargs == {"backend": "inductor", "mode": "max-autotune", "fullgraph": True}
    # the environment is back once the default was built
    assert os.environ["ACCEL_DYNAMO_BACKEND"] == "INDUCTOR"


def test_dynamo_to_kwargs_and_to_dict_give_the_backend_as_a_lowercase_string(monkeypatch):
    monkeypatch.delenv("ACCEL_DYNAMO_BACKEND", raising=False)
    monkeypatch.delenv("ACCELERATE_DYNAMO_BACKEND", raising=False)
    plugin = TorchDynamoPlugin(backend="EAGER")
    assert plugin.to_kwargs()["backend"] == "eager"
    assert plugin.to_dict()["backend"] == "eager"
    assert (
        "use_regional_compilation"
        not in TorchDynamoPlugin(use_regional_compilation=True).to_kwargs()
    )


def test_accelerate_spelling_of_the_variable_counts_too(monkeypatch):
    monkeypatch.delenv("ACCEL_DYNAMO_MODE", raising=False)
    monkeypatch.setenv("ACCELERATE_DYNAMO_MODE", "reduce-overhead")
    assert TorchDynamoPlugin().to_kwargs().get("mode") == "reduce-overhead"


def test_other_handlers_still_return_only_changed_fields():
    assert GradScalerKwargs(init_scale=1024.0).to_kwargs() == {"init_scale": 1024.0}
