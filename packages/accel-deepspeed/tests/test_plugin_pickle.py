"""A DeepSpeedPlugin attached to a run still pickles: transformers saves TrainingArguments,
which hold the plugin, with every checkpoint."""

from __future__ import annotations

import pickle


class _Run:
    """A run context holding what cannot be pickled (a prepared engine's local hooks)."""

    mixed_precision = "bf16"

    def __init__(self):
        self.hook = lambda: None


def test_an_attached_plugin_pickles_without_its_run():
    from accel_deepspeed.config import DeepSpeedPlugin

    plugin = DeepSpeedPlugin(zero_stage=2)
    plugin.attach(_Run())
    copy = pickle.loads(pickle.dumps(plugin))
    assert copy._run is None and plugin._run is not None
    assert copy.zero_stage == 2 and copy.deepspeed_config == plugin.deepspeed_config
