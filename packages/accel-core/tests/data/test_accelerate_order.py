"""Same seed, same numbers as Accelerate 1.15 (and, on one process, as plain PyTorch).

The reference numbers are integration-tests/reference/accelerate-1.15/*.json, written by the
real Accelerate through tools/accelerate_reference.py. Here they are checked in one process:
the 1-process reference script runs in-process under accel, and the 2-process orders are
rebuilt rank by rank with ``prepare_data_loader(num_processes=2, process_index=rank)``.
integration-tests/reference/test_accelerate_numbers.py checks them on real processes.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import torch
from accel import Accelerator, DataLoaderConfiguration
from accel.data_loader import SeedableRandomSampler, get_sampler, prepare_data_loader
from accel.state import AcceleratorState, GradientState
from accel.utils import set_seed
from torch import nn
from torch.utils.data import DataLoader, RandomSampler

ROOT = Path(__file__).resolve().parents[4]
REFERENCE = ROOT / "integration-tests" / "reference" / "accelerate-1.15"
SCRIPTS = ROOT / "tools" / "reference_scripts"


def _reference(name: str) -> dict:
    return json.loads((REFERENCE / f"{name}.json").read_text())


def _script(name: str):
    """A reference script of tools/reference_scripts/, imported as a module (under accel)."""
    sys.path.insert(0, str(SCRIPTS))
    try:
        spec = importlib.util.spec_from_file_location(f"_reference_{name}", SCRIPTS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(SCRIPTS))
    return module


@pytest.fixture(autouse=True)
def _one_thread():
    """The reference ran with one thread (a float sum's order depends on the thread count)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _reset() -> None:
    AcceleratorState._reset_state(True)
    GradientState._reset_state()


def _fingerprint(generator: torch.Generator | None = None) -> bytes:
    return bytes((torch.get_rng_state() if generator is None else generator.get_state()).tolist())


# -- one process: plain PyTorch's numbers -------------------------------------------------


def _loaders(kind: str):
    """(the plain DataLoader, an identical one for preparing, the generator involved)."""

    def build():
        g = torch.Generator().manual_seed(5) if "generator" in kind else None
        data = list(range(23))
        if kind == "replacement":
            sampler = RandomSampler(data, replacement=True, num_samples=40)
            return DataLoader(data, batch_size=4, sampler=sampler), None
        if kind == "num_samples":
            return DataLoader(data, batch_size=4, sampler=RandomSampler(data, num_samples=30)), g
        return DataLoader(data, batch_size=5, shuffle=True, drop_last=True, generator=g), g

    return build


@pytest.mark.parametrize("kind", ["shuffle", "generator", "replacement", "num_samples"])
@pytest.mark.parametrize("stateful", [False, True])
def test_one_process_gives_plain_pytorchs_order_and_draws(kind, stateful):
    """Batches, and the global generator (and the loader's) after every epoch, as a plain loop."""
    if stateful:
        pytest.importorskip("torchdata")
    build = _loaders(kind)

    def epochs(loader, generator):
        seen = []
        for epoch in range(3):
            if kind == "generator" and epoch == 2:
                generator.manual_seed(77)  # a user re-seeding their generator is honoured
            seen.append([b.tolist() for b in loader])
            seen.append(_fingerprint())
            if generator is not None:
                seen.append(_fingerprint(generator))
        return seen

    set_seed(3)
    expected = epochs(*build())
    _reset()
    set_seed(3)
    config = DataLoaderConfiguration(use_stateful_dataloader=stateful)
    loader, generator = build()
    prepared = Accelerator(cpu=True, dataloader_config=config).prepare(loader)
    assert epochs(prepared, generator) == expected


def test_iterating_draws_the_base_seed_from_the_global_generator():
    """Every iter() of a prepared loader takes torch's base-seed draw, even with no workers."""
    _reset()
    data = list(range(8))
    prepared = Accelerator(cpu=True).prepare(DataLoader(data, batch_size=4))  # no shuffling
    torch.manual_seed(0)
    for _ in range(3):
        list(iter(DataLoader(data, batch_size=4)))
    expected = _fingerprint()
    torch.manual_seed(0)
    for _ in range(3):
        list(prepared)
    assert _fingerprint() == expected
    torch.manual_seed(0)
    list(prepared)
    torch.empty((), dtype=torch.int64).random_()  # one draw, no more
    torch.manual_seed(0)
    list(prepared)
    one = _fingerprint()
    torch.manual_seed(0)
    torch.empty((), dtype=torch.int64).random_()
    assert _fingerprint() == one


def test_seedable_order_is_a_function_of_seed_and_epoch():
    _reset()
    data = list(range(10))
    config = DataLoaderConfiguration(use_seedable_sampler=True, data_seed=21)
    loader = Accelerator(cpu=True, dataloader_config=config).prepare(
        DataLoader(data, batch_size=10, shuffle=True)
    )
    assert isinstance(get_sampler(loader), SeedableRandomSampler)
    for epoch in (0, 1, 5):
        loader.set_epoch(epoch)
        (batch,) = list(loader)
        generator = torch.Generator().manual_seed(21 + epoch)
        assert batch.tolist() == torch.randperm(10, generator=generator).tolist()


def test_the_default_keeps_a_resumable_copy_of_torchs_sampler():
    from accel.data_loader import ResumableRandomSampler

    _reset()
    original = DataLoader(list(range(10)), batch_size=2, shuffle=True)
    loader = Accelerator(cpu=True).prepare(original)
    assert type(get_sampler(loader)) is ResumableRandomSampler
    assert type(get_sampler(original)) is RandomSampler  # the user's loader is left alone


# -- the committed Accelerate reference ------------------------------------------------


def _cases(name: str) -> list[str]:
    return list(_reference(name)["ranks"][0])


@pytest.mark.parametrize("case", _cases("loader_orders"))
def test_loader_orders_equal_accelerates_on_one_process(case):
    """Each case of tools/reference_scripts/loader_orders.py, run here, equals Accelerate's JSON."""
    _reset()
    module = _script("loader_orders")
    result = json.loads(json.dumps(module.CASES[case]()))
    assert result == _reference("loader_orders")["ranks"][0][case]


def _two_process_orders(rank: int, **options) -> dict:
    """The ``shuffle`` / ``seedable`` / ``generator`` cases of the 2-process reference, as one rank."""
    set_seed(1234)
    generator = options.pop("generator", None)
    loader = prepare_data_loader(
        DataLoader(list(range(23)), batch_size=4, shuffle=True, generator=generator),
        num_processes=2,
        process_index=rank,
        rng_types=["generator"],
        **options,
    )
    common = _script("_common")
    record = {"after_prepare": common.fingerprint(), "epochs": []}
    for epoch in range(3):
        if options.get("use_seedable_sampler"):
            loader.set_epoch(epoch)
        entry = {"batches": [b.tolist() for b in loader], "rng": common.fingerprint()}
        if generator is not None:
            entry["generator"] = common.fingerprint(generator)
        record["epochs"].append(entry)
    return record


@pytest.mark.parametrize("rank", [0, 1])
@pytest.mark.parametrize("case", ["shuffle", "seedable", "generator"])
def test_two_process_orders_equal_accelerates(case, rank):
    options = {
        "shuffle": {},
        "seedable": {"use_seedable_sampler": True},
        "generator": {"generator": torch.Generator().manual_seed(99)},
    }[case]
    _reset()
    expected = _reference("loader_orders_2proc")["ranks"][rank][case]
    assert _two_process_orders(rank, **options) == expected


@pytest.mark.parametrize("case", _cases("train_dropout"))
def test_dropout_training_losses_equal_accelerates(case, tmp_path):
    """Every loss of the seeded dropout MLP, bit for bit, on one process."""
    _reset()
    module = _script("train_dropout")
    module.OPTIONS = _options()
    result = json.loads(json.dumps(module.CASES[case]()))
    assert result == _reference("train_dropout")["ranks"][0][case]


def _options(**values):
    import argparse

    defaults = {"save_at": None, "checkpoint": None, "resume": None}
    return argparse.Namespace(**{**defaults, **values})


@pytest.mark.parametrize("case", _cases("train_dropout"))
@pytest.mark.parametrize("step", [4, 9, 13])
def test_mid_epoch_resume_gives_accelerates_uninterrupted_losses(case, step, tmp_path):
    """save_state after ``step`` steps, load_state in a new Accelerator: the losses go on as Accelerate's
    uninterrupted run (9 steps per epoch: 4 and 13 are inside an epoch, 9 its last step)."""
    module = _script("train_dropout")
    _reset()
    module.OPTIONS = _options(save_at=step, checkpoint=str(tmp_path / "ckpt"))
    first = module.CASES[case]()["losses"]
    _reset()
    torch.manual_seed(999)  # the resumed run starts from another state: load_state restores it
    nn.Linear(2, 2)
    module.OPTIONS = _options(resume=str(tmp_path / "ckpt"))
    rest = module.CASES[case]()["losses"]
    expected = _reference("train_dropout")["ranks"][0][case]["losses"]
    assert first == expected[:step]
    assert rest == expected[step:]


def test_reference_scripts_are_the_committed_ones():
    """The reference JSON files exist for every script case (regenerate: tools/accelerate_reference.py)."""
    for name in ("loader_orders", "loader_orders_2proc", "train_dropout", "train_dropout_2proc"):
        document = _reference(name)
        assert document["versions"]["accelerate"] == "1.15.0"
        assert document["num_processes"] == (2 if name.endswith("_2proc") else 1)
