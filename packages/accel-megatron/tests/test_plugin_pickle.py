"""A MegatronLMPlugin attached to a run pickles without it (the run holds the prepared model)."""

from __future__ import annotations

import pickle


class _Run:
    mixed_precision = "bf16"

    def __init__(self):
        self.hook = lambda: None


def test_an_attached_plugin_pickles_without_its_run():
    from accel_megatron.config import MegatronLMPlugin

    plugin = MegatronLMPlugin(tp_degree=2)
    plugin.attach(_Run())
    assert plugin.mixed_precision == "bf16"
    copy = pickle.loads(pickle.dumps(plugin))
    assert copy.mixed_precision == "no" and copy.tp_degree == 2
