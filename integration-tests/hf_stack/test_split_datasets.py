"""``split_between_processes`` on a ``datasets.Dataset``: each process gets its share as a
dataset (``select``), as in Accelerate; padding repeats the last row."""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import pytest
from accel.state import split_inputs

WORKERS = Path(__file__).parent / "workers"


def _table(rows: int) -> datasets.Dataset:
    return datasets.Dataset.from_dict({"row": list(range(rows))})


@pytest.mark.parametrize(
    ("rows", "world", "plain", "padded"),
    [
        (5, 2, [[0, 1, 2], [3, 4]], [[0, 1, 2], [3, 4, 4]]),
        (7, 3, [[0, 1, 2], [3, 4], [5, 6]], [[0, 1, 2], [3, 4, 6], [5, 6, 6]]),  # the last row
        (1, 3, [[0], [], []], [[0], [0], [0]]),
        (0, 2, [[], []], [[], []]),
    ],
)
def test_each_share_is_a_dataset(rows, world, plain, padded):
    table = _table(rows)
    for rank in range(world):
        part = split_inputs(table, world, rank)
        assert isinstance(part, datasets.Dataset)
        assert part["row"][:] == plain[rank]
        part = split_inputs(table, world, rank, pad=True)
        assert isinstance(part, datasets.Dataset)
        assert part["row"][:] == padded[rank]


def test_one_process_gets_the_dataset_itself():
    table = _table(3)
    assert split_inputs(table, 1, 0) is table


def test_split_between_processes_on_two_gloo_processes(tmp_path):
    from accel.testing.processes import run_processes

    run_processes(WORKERS / "datasets_split.py", [str(tmp_path)], nproc=2, timeout=240)
    seen = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert [s["plain"] for s in seen] == [[0, 1, 2], [3, 4]]
    assert [s["padded"] for s in seen] == [[0, 1, 2], [3, 4, 4]]
    assert [s["padded_text"] for s in seen] == [["a", "b", "c"], ["d", "e", "e"]]
    assert [s["dict"] for s in seen] == [[[0, 1, 2], [0, 1, 2]], [[3, 4], [3, 4]]]
    assert seen[0]["gathered"] == seen[1]["gathered"] == [0, 1, 2, 3, 4, 4]
