"""``accel.utils.get_model_tp_size`` (Accelerate 1.15.0's ``accelerate.utils`` name)."""

from __future__ import annotations

from types import SimpleNamespace

import torch


def test_get_model_tp_size_reads_both_transformers_layouts():
    from accel.utils import get_model_tp_size

    model = torch.nn.Linear(2, 2)
    assert get_model_tp_size(model) is None
    model.tp_size = 2  # transformers < 5: on the model
    assert get_model_tp_size(model) == 2
    model.tp_size = None  # transformers >= 5: a None stub, the degree in the config
    model.config = SimpleNamespace(distributed_config=SimpleNamespace(tp_size=4))
    assert get_model_tp_size(model) == 4
    model.config = SimpleNamespace(distributed_config={"tp_size": 8})  # after a JSON round trip
    assert get_model_tp_size(model) == 8
    model.config = SimpleNamespace(distributed_config=None)
    assert get_model_tp_size(model) is None
