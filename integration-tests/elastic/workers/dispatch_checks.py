"""Worker: gather_for_metrics returns each sample once on every prepared-loader path, and a
dispatched loader's position continues on another number of processes.

Arguments: OUT MODE. MODE ``metrics``: every path (Accelerate's default dispatcher for an
iterable dataset, ``split_batches``, the shard path, ``even_batches=False`` with ``empty_batches`` so that the
collectives stay matched) over 66 samples
with batch 8. MODE ``save``: three dispatched batches of an iterable and of a shuffled
map-style dataset, then the positions go to OUT/positions.pt; MODE ``resume``: loads them
and reads the rest. The gathered ids go to OUT/<MODE>.json (rank 0).
"""

import json
import sys
from pathlib import Path

import torch
from accel import Accelerator
from accel.data.loader import DataLoaderDispatcher, prepare_data_loader
from torch.utils.data import DataLoader, IterableDataset

out, mode = Path(sys.argv[1]), sys.argv[2]
accelerator = Accelerator()
n = accelerator.num_processes


class Stream(IterableDataset):
    def __init__(self, size: int):
        self.size = size

    def __iter__(self):
        return iter(torch.arange(self.size).tolist())


def gathered(loader, limit=None):
    ids = []
    for index, batch in enumerate(loader):
        ids += accelerator.gather_for_metrics(batch).tolist()
        if limit is not None and index + 1 == limit:
            break
    return ids


def prepare(loader, **options):
    return prepare_data_loader(loader, device=accelerator.device, put_on_device=True, **options)


result = {}
if mode == "metrics":
    default = accelerator.prepare(DataLoader(Stream(66), batch_size=8))
    assert isinstance(default, DataLoaderDispatcher), type(default)  # Accelerate's default
    result["dispatched"] = gathered(default)
    result["dispatched_split"] = gathered(
        prepare(DataLoader(Stream(66), batch_size=8), split_batches=True)
    )
    result["sharded_stream"] = gathered(
        prepare(DataLoader(Stream(66), batch_size=8), dispatch_batches=False)
    )
    result["sharded"] = gathered(prepare(DataLoader(list(range(66)), batch_size=8)))
    accelerator.even_batches = False  # gather_for_metrics gathers batches of unequal sizes
    result["not_even"] = gathered(
        prepare(DataLoader(list(range(66)), batch_size=8), even_batches=False, empty_batches=True)
    )
    accelerator.even_batches = True
    result["dispatched_map"] = gathered(
        prepare(DataLoader(list(range(66)), batch_size=8), dispatch_batches=True)
    )
else:
    torch.manual_seed(0)
    stream = prepare(DataLoader(Stream(96), batch_size=4), dispatch_batches=True)
    shuffled = prepare(
        DataLoader(list(range(96)), batch_size=4, shuffle=True), dispatch_batches=True
    )
    if mode == "save":
        result["stream"] = gathered(stream, limit=3)
        result["shuffled"] = gathered(shuffled, limit=3)
        if accelerator.is_main_process:
            torch.save([stream.state_dict(), shuffled.state_dict()], out / "positions.pt")
    else:
        positions = torch.load(out / "positions.pt", weights_only=False)
        stream.load_state_dict(positions[0])
        shuffled.load_state_dict(positions[1])
        result["stream"] = gathered(stream)
        result["shuffled"] = gathered(shuffled)
if accelerator.is_main_process:
    (out / f"{mode}-{n}.json").write_text(json.dumps(result))
accelerator.wait_for_everyone()
