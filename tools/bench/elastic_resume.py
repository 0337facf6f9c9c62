"""Time to the first batch when resuming at sample 1,000,000 of a 2,000,000-sample epoch.

Side by side in one run (medians of ``--repeat`` runs, shuffled map-style dataset, batch 8):

* accel, resumed on another number of processes (a position saved on 2, loaded on 1):
  the sampler's order is drawn and the first million indices passed over, no sample read;
* accel, resumed on the same layout (skips whole batches at the sampler);
* plain PyTorch, skipping by iterating the DataLoader (reads and collates every skipped sample);
* plain PyTorch, skipping at the batch sampler (iterates the skipped batches' indices);
* Accelerate's ``skip_first_batches``, when the environment has the real Accelerate
  (``tools/bench/accelerate_env.py tools/bench/elastic_resume.py``).

    uv run python tools/bench/elastic_resume.py [--repeat 5] [--samples 2000000]
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time

import torch
from torch.utils.data import BatchSampler, DataLoader, Dataset, RandomSampler


class Indices(Dataset):
    """A dataset whose sample ``i`` is ``i`` (reading one costs what ``__getitem__`` costs)."""

    def __init__(self, size: int):
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> int:
        return index


def _median(function, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--samples", type=int, default=2_000_000)
    args = parser.parse_args()
    size, batch = args.samples, 8
    at = size // 2
    from accel.data.loader import prepare_data_loader

    def accel_resized() -> None:
        loader = prepare_data_loader(DataLoader(Indices(size), batch_size=batch, shuffle=True))
        state = loader.state_dict()
        state.update(num_processes=2, samples_seen=at, batches_seen=at // batch)
        state["sampler"] = {"seed": 5}
        loader.load_state_dict(state)
        next(iter(loader))

    def accel_same_layout() -> None:
        loader = prepare_data_loader(DataLoader(Indices(size), batch_size=batch, shuffle=True))
        state = loader.state_dict()
        state.update(batches_yielded=at // batch, samples_seen=at, batches_seen=at // batch)
        state["sampler"] = {"seed": 5}
        loader.load_state_dict(state)
        next(iter(loader))

    def torch_reading() -> None:
        loader = DataLoader(Indices(size), batch_size=batch, shuffle=True)
        next(itertools.islice(loader, at // batch, None))

    def torch_batch_sampler() -> None:
        sampler = BatchSampler(RandomSampler(Indices(size)), batch, False)
        loader = DataLoader(Indices(size), batch_sampler=sampler)
        indices = next(itertools.islice(iter(sampler), at // batch, None))
        loader.collate_fn([loader.dataset[i] for i in indices])

    rows = [
        ("accel, resumed on another size", _median(accel_resized, args.repeat)),
        ("accel, resumed on the same size", _median(accel_same_layout, args.repeat)),
        ("PyTorch, skipping by reading", _median(torch_reading, max(1, args.repeat // 2))),
        ("PyTorch, skipping batch indices", _median(torch_batch_sampler, args.repeat)),
    ]
    try:
        from accelerate.data_loader import skip_first_batches
        from accelerate.utils.versions import importlib_metadata  # noqa: F401  (real Accelerate)

        def accelerate_skip() -> None:
            loader = DataLoader(Indices(size), batch_size=batch, shuffle=True)
            next(iter(skip_first_batches(loader, at // batch)))

        rows.append(("Accelerate skip_first_batches", _median(accelerate_skip, args.repeat)))
    except ImportError:
        from accelerate_env import ACCELERATE_HINT  # noqa: PLC0415  (tools/bench on sys.path)

        print(f"(Accelerate not in this environment: {ACCELERATE_HINT})")
    base = rows[0][1]
    print(f"resume at sample {at:,} of {size:,}, batch {batch}, median of {args.repeat}")
    for name, seconds in rows:
        print(f"  {name:36s} {seconds * 1000:9.1f} ms   x{seconds / base:6.2f} of accel resized")
    torch.set_num_threads(torch.get_num_threads())


if __name__ == "__main__":
    main()
