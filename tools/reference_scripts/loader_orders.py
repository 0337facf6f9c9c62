"""Sample orders of prepared data loaders over 3 epochs, and what iterating takes from the RNGs.

    python loader_orders.py --output orders.json                          # 1 process
    accelerate launch --multi_gpu --num_processes 2 loader_orders.py --output orders.json

Every case seeds with ``set_seed``, builds an ``Accelerator`` and a shuffling ``DataLoader``
whose batch size does not divide the dataset, prepares it and records, per epoch, the
batches this process gets and a fingerprint of the global torch generator (and of the
loader's own generator when it has one) after the epoch. The fingerprints show how many
numbers each epoch draws: a training step's dropout masks come from the same generator.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader

sys.path.insert(0, str(Path(__file__).parent))
from _common import batches_of, fingerprint, parse_args, run_cases  # noqa: E402
from accelerate import Accelerator, skip_first_batches  # noqa: E402
from accelerate.utils import DataLoaderConfiguration, set_seed  # noqa: E402

SEED = 1234
SAMPLES = 23
EPOCHS = 3


def _epochs(
    loader: Any,
    *,
    set_epoch: bool = False,
    before: Callable[[int], None] | None = None,
    generator: torch.Generator | None = None,
) -> dict[str, Any]:
    record: dict[str, Any] = {"after_prepare": fingerprint(), "epochs": []}
    for epoch in range(EPOCHS):
        if before is not None:
            before(epoch)
        if set_epoch:
            loader.set_epoch(epoch)
        entry = {"batches": batches_of(loader), "rng": fingerprint()}
        if generator is not None:
            entry["generator"] = fingerprint(generator)
        record["epochs"].append(entry)
    return record


def _prepared(
    batch_size: int = 4,
    drop_last: bool = False,
    generator: torch.Generator | None = None,
    **config: Any,
) -> Any:
    accelerator = Accelerator(cpu=True, dataloader_config=DataLoaderConfiguration(**config))
    loader = DataLoader(
        list(range(SAMPLES)),
        batch_size=batch_size,
        shuffle=True,
        drop_last=drop_last,
        generator=generator,
    )
    return accelerator.prepare(loader)


def plain_pytorch() -> dict[str, Any]:
    """No Accelerator at all: what a plain PyTorch loop sees (the default's model on 1 process)."""
    set_seed(SEED)
    loader = DataLoader(list(range(SAMPLES)), batch_size=4, shuffle=True)
    return _epochs(loader)


def shuffle() -> dict[str, Any]:
    """The default: a RandomSampler without a generator."""
    set_seed(SEED)
    return _epochs(_prepared())


def shuffle_set_epoch() -> dict[str, Any]:
    """The default with ``set_epoch(epoch)`` before each epoch."""
    set_seed(SEED)
    return _epochs(_prepared(), set_epoch=True)


def shuffle_drop_last() -> dict[str, Any]:
    """The default, batches of 5 and ``drop_last=True``."""
    set_seed(SEED)
    return _epochs(_prepared(batch_size=5, drop_last=True))


def break_mid_epoch() -> dict[str, Any]:
    """Leave the first epoch after 2 batches, then run the epochs through."""
    set_seed(SEED)
    loader = _prepared()
    first = []
    for batch in loader:
        first.append(batch.tolist())
        if len(first) == 2:
            break
    return {"first": first, "after_break": fingerprint(), **_epochs(loader)}


def seedable() -> dict[str, Any]:
    """``use_seedable_sampler=True`` with ``set_epoch``: the order is a function of (seed, epoch)."""
    set_seed(SEED)
    return _epochs(_prepared(use_seedable_sampler=True), set_epoch=True)


def seedable_no_set_epoch() -> dict[str, Any]:
    """``use_seedable_sampler=True`` without ``set_epoch``."""
    set_seed(SEED)
    return _epochs(_prepared(use_seedable_sampler=True))


def seedable_data_seed() -> dict[str, Any]:
    """``use_seedable_sampler=True, data_seed=77``."""
    set_seed(SEED)
    return _epochs(_prepared(use_seedable_sampler=True, data_seed=77), set_epoch=True)


def generator() -> dict[str, Any]:
    """``DataLoader(generator=g)``, seeded once: the order continues g's stream."""
    set_seed(SEED)
    g = torch.Generator()
    g.manual_seed(99)
    return _epochs(_prepared(generator=g), generator=g)


def generator_reseeded() -> dict[str, Any]:
    """``DataLoader(generator=g)`` with ``g.manual_seed(100 + epoch)`` before each epoch."""
    set_seed(SEED)
    g = torch.Generator()
    g.manual_seed(99)
    return _epochs(_prepared(generator=g), before=lambda e: g.manual_seed(100 + e), generator=g)


def seedable_generator() -> dict[str, Any]:
    """``use_seedable_sampler=True`` and ``DataLoader(generator=g)``."""
    set_seed(SEED)
    g = torch.Generator()
    g.manual_seed(99)
    return _epochs(_prepared(generator=g, use_seedable_sampler=True), set_epoch=True, generator=g)


def _skip_then_set_epoch(**config: Any) -> dict[str, Any]:
    # What transformers' Trainer does when it resumes inside epoch 1: skip_first_batches on
    # the prepared loader, then set_epoch on what it returned; then the next epoch as usual.
    set_seed(SEED)
    loader = _prepared(**config)
    loader.set_epoch(0)
    record = {"epoch0": batches_of(loader), "rng0": fingerprint()}
    skipped = skip_first_batches(loader, 2)
    skipped.set_epoch(1)
    record["epoch1_skipped"] = batches_of(skipped)
    record["rng1"] = fingerprint()
    loader.set_epoch(2)
    record["epoch2"] = batches_of(loader)
    record["rng2"] = fingerprint()
    return record


def skip_then_set_epoch() -> dict[str, Any]:
    """Trainer's resume: ``skip_first_batches(loader, 2)`` then ``set_epoch(1)`` (default sampler)."""
    return _skip_then_set_epoch()


def skip_then_set_epoch_seedable() -> dict[str, Any]:
    """Trainer's resume with ``use_seedable_sampler=True``."""
    return _skip_then_set_epoch(use_seedable_sampler=True)


CASES = {
    "plain_pytorch": plain_pytorch,
    "shuffle": shuffle,
    "shuffle_set_epoch": shuffle_set_epoch,
    "shuffle_drop_last": shuffle_drop_last,
    "break_mid_epoch": break_mid_epoch,
    "seedable": seedable,
    "seedable_no_set_epoch": seedable_no_set_epoch,
    "seedable_data_seed": seedable_data_seed,
    "generator": generator,
    "generator_reseeded": generator_reseeded,
    "seedable_generator": seedable_generator,
    "skip_then_set_epoch": skip_then_set_epoch,
    "skip_then_set_epoch_seedable": skip_then_set_epoch_seedable,
}


if __name__ == "__main__":
    run_cases("loader_orders", CASES, parse_args(__doc__.splitlines()[0]))
