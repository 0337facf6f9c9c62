"""Each rank takes its share of a 5-row ``datasets.Dataset`` with ``split_between_processes``
(``PartialState``'s and ``Accelerator``'s, with and without padding) and writes what it got."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(out: str) -> None:
    import datasets
    from accel import Accelerator, PartialState
    from accel.utils import gather_object

    table = datasets.Dataset.from_dict({"row": list(range(5)), "text": list("abcde")})
    state = PartialState()
    seen = {}
    with state.split_between_processes(table) as part:
        assert isinstance(part, datasets.Dataset), type(part)
        seen["plain"] = part["row"][:]
    accelerator = Accelerator()
    with accelerator.split_between_processes(table, apply_padding=True) as part:
        assert isinstance(part, datasets.Dataset), type(part)
        seen["padded"] = part["row"][:]
        seen["padded_text"] = part["text"][:]
    with state.split_between_processes({"table": table, "ids": list(range(5))}) as part:
        seen["dict"] = [part["table"]["row"][:], part["ids"]]
    seen["gathered"] = gather_object(seen["padded"])
    Path(out, f"rank{state.process_index}.json").write_text(json.dumps(seen))


if __name__ == "__main__":
    main(sys.argv[1])
