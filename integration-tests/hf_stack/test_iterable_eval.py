"""Trainer.evaluate on an IterableDataset (66 samples, eval batch 8) reports the same eval_loss on
2 real processes as on 1: the rows padded onto the last batch are not counted, as with Accelerate."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("transformers")
pytestmark = pytest.mark.timeout(600)


def test_iterable_evaluation_counts_each_sample_once(run_distributed, tmp_path):
    env = {"HF_HUB_OFFLINE": "1"}
    results = {}
    for nproc in (1, 2):
        run_distributed("iterable_eval.py", str(tmp_path), nproc=nproc, env=env)
        results[nproc] = json.loads((tmp_path / f"eval-{nproc}.json").read_text())
    # one process: every batch real, each sample once; two must give the same number (before,
    # the padded last batch's loss counted for all its rows: another eval_loss on 2 processes)
    exact = results[1]["iterable_loss"]
    assert results[2]["iterable_loss"] == pytest.approx(exact, rel=1e-6)
    assert results[2]["loader"] == "DataLoaderDispatcher"  # Accelerate's default for iterables
