"""``split_between_processes`` gives an object like a ``datasets.Dataset`` (``select``,
``__len__``, ``column_names``) its share through ``select``, as Accelerate does for datasets."""

from __future__ import annotations

from accel.state import split_inputs


class Table:
    """A minimal dataset-like table: rows selected by index."""

    column_names = ["row"]

    def __init__(self, rows):
        self.rows = list(rows)

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, key):
        if isinstance(key, slice):
            return {"row": self.rows[key]}  # as datasets does: a dict of columns, not a table
        return self.rows[key]

    def select(self, indices):
        return Table(self.rows[i] for i in indices)


def test_a_dataset_like_share_is_selected():
    table = Table([10, 11, 12, 13, 14])
    parts = [split_inputs(table, 2, rank) for rank in range(2)]
    assert all(isinstance(p, Table) for p in parts)
    assert [p.rows for p in parts] == [[10, 11, 12], [13, 14]]
    padded = [split_inputs(table, 2, rank, pad=True) for rank in range(2)]
    assert [p.rows for p in padded] == [[10, 11, 12], [13, 14, 14]]
    assert [split_inputs(Table([7]), 3, r, pad=True).rows for r in range(3)] == [[7], [7], [7]]
    assert split_inputs({"t": table}, 2, 1)["t"].rows == [13, 14]
