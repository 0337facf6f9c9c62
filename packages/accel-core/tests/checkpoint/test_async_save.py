"""``save_state(..., async_save=True)``: same checkpoint as a synchronous save, written in the background.

Checked here, in one process on the CPU: resuming from an asynchronous checkpoint equals
resuming from a synchronous one bit for bit, even though training changed the tensors
while the files were written; the checkpoint appears under its name only once complete,
``total_limit`` pruning waits for it, a second save and ``wait_for_everyone`` wait for it;
a failed write is raised by the next ``backward``; interpreter exit waits for the write.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from accel import Accelerator, ProjectConfiguration
from accel.checkpoint import layout, manifest
from accel.errors import CheckpointError
from safetensors.torch import load_file
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

pytestmark = pytest.mark.usefixtures("clean_accel_state")


class Counter:
    """A registered object with a mutable state (a list the loop appends to)."""

    def __init__(self) -> None:
        self.seen: list[int] = []

    def state_dict(self) -> dict:
        return {"seen": self.seen}

    def load_state_dict(self, state: dict) -> None:
        self.seen = list(state["seen"])


class Gate:
    """Pickling this (in the background writer's ``torch.save``) waits for ``event``, or fails."""

    def __init__(self, event: threading.Event | None = None, fail: bool = False):
        self.event, self.fail = event, fail

    def __deepcopy__(self, memo: dict) -> Gate:  # staged as it is
        return self

    def __reduce__(self):
        if self.fail:
            raise OSError("disk full (simulated by the test's object)")
        assert self.event is not None and self.event.wait(60), "the test never opened the gate"
        return (int, (0,))


class Gated:
    """A registered object whose state holds a :class:`Gate`."""

    def __init__(self, gate: Gate):
        self.gate = gate

    def state_dict(self) -> dict:
        return {"gate": self.gate}

    def load_state_dict(self, state: dict) -> None:
        pass


def _setup(tmp_path: Path | None = None, total_limit: int | None = None, **kwargs):
    config = None
    if tmp_path is not None:
        config = ProjectConfiguration(
            project_dir=str(tmp_path), automatic_checkpoint_naming=True, total_limit=total_limit
        )
    accelerator = Accelerator(cpu=True, project_config=config, **kwargs)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.1), nn.Linear(16, 4))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=3, gamma=0.5)
    generator = torch.Generator().manual_seed(1)
    data = TensorDataset(torch.randn(64, 8, generator=generator), torch.randint(0, 4, (64,)))
    loader = DataLoader(data, batch_size=4, shuffle=True)
    objects = accelerator.prepare(model, optimizer, loader, scheduler)
    return accelerator, *objects


def _train(accelerator, model, optimizer, loader, scheduler, steps: int, counter=None) -> None:
    done = 0
    while done < steps:
        for inputs, targets in loader:
            with accelerator.accumulate(model):
                loss = F.cross_entropy(model(inputs), targets)
                accelerator.backward(loss)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
            if counter is not None:
                counter.seen.append(done)
            done += 1
            if done == steps:
                return


def _same_files(a: Path, b: Path) -> None:
    """The same tensors in the weights (safetensors orders its metadata at random), the same
    bytes in every ``torch.save`` file."""
    first, second = load_file(a / "model.safetensors"), load_file(b / "model.safetensors")
    assert first.keys() == second.keys()
    assert all(torch.equal(first[k], second[k]) for k in first)
    for name in ("optimizer.bin", "scheduler.bin", "dl_state_dict.bin", "random_states_0.pkl"):
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def _tensors(model, optimizer) -> list[torch.Tensor]:
    out = [t.detach().clone() for t in model.state_dict().values()]
    for state in optimizer.state_dict()["state"].values():
        out += [v.clone() for v in state.values() if isinstance(v, torch.Tensor)]
    return out


def test_resume_from_async_checkpoint_equals_resume_from_sync(tmp_path):
    accelerator, model, optimizer, loader, scheduler = _setup()
    counter = Counter()
    accelerator.register_for_checkpointing(counter)
    _train(accelerator, model, optimizer, loader, scheduler, 7, counter)
    sync_dir, async_dir = tmp_path / "sync", tmp_path / "async"
    accelerator.save_state(sync_dir)
    accelerator.save_state(async_dir, async_save=True)
    # training goes on (and changes every tensor and the counter) while the files are written
    _train(accelerator, model, optimizer, loader, scheduler, 5, counter)
    accelerator.wait_for_everyone()
    assert not layout.temporary_dir(async_dir).exists()
    assert manifest.problems(async_dir) == []
    names = sorted(p.name for p in sync_dir.iterdir())
    assert names == sorted(p.name for p in async_dir.iterdir())
    _same_files(sync_dir, async_dir)

    results = []
    for folder in (sync_dir, async_dir):
        accelerator.load_state(folder)
        assert counter.seen == list(range(7))
        loaded = _tensors(model, optimizer)
        torch.manual_seed(123)  # the same dropout masks after both resumes
        _train(accelerator, model, optimizer, loader, scheduler, 6)
        results.append((loaded, _tensors(model, optimizer), scheduler.get_last_lr()))
    (loaded_a, trained_a, lr_a), (loaded_b, trained_b, lr_b) = results
    assert len(loaded_a) == len(loaded_b) and len(trained_a) == len(trained_b)
    assert all(torch.equal(a, b) for a, b in zip(loaded_a, loaded_b))
    assert all(torch.equal(a, b) for a, b in zip(trained_a, trained_b))
    assert lr_a == lr_b


def test_checkpoint_appears_only_when_complete_and_pruning_waits(tmp_path):
    accelerator, model, optimizer, loader, scheduler = _setup(tmp_path, total_limit=1)
    _train(accelerator, model, optimizer, loader, scheduler, 2)
    first = Path(accelerator.save_state())  # synchronous checkpoint_0
    event = threading.Event()
    accelerator.register_for_checkpointing(Gated(Gate(event)))
    second = Path(accelerator.save_state(async_save=True))
    assert second.name == "checkpoint_1"
    time.sleep(0.2)
    writer = accelerator.checkpoints.async_writer
    assert writer.pending
    assert not second.exists() and layout.temporary_dir(second).exists()
    assert first.exists()  # pruned only after the new checkpoint is complete
    assert [p.name for p in layout.list_checkpoints(tmp_path / "checkpoints")] == ["checkpoint_0"]
    _train(accelerator, model, optimizer, loader, scheduler, 2)  # training is not blocked
    event.set()
    accelerator.wait_for_everyone()
    assert not writer.pending
    assert second.exists() and manifest.problems(second) == []
    assert not first.exists()
    assert not layout.temporary_dir(second).exists()


def test_second_save_waits_for_the_first(tmp_path):
    accelerator, model, optimizer, loader, scheduler = _setup(tmp_path)
    event = threading.Event()
    accelerator.register_for_checkpointing(Gated(Gate(event)))
    first = Path(accelerator.save_state(async_save=True))
    opener = threading.Timer(0.5, event.set)
    start = time.monotonic()
    opener.start()
    second = Path(accelerator.save_state())  # synchronous: must wait for the pending one
    assert time.monotonic() - start >= 0.4
    assert manifest.problems(first) == [] and manifest.problems(second) == []
    third = Path(accelerator.save_state(async_save=True))
    accelerator.end_training()  # waits as well
    assert manifest.problems(third) == []


def test_failed_write_is_raised_by_the_next_backward(tmp_path):
    accelerator, model, optimizer, loader, scheduler = _setup(tmp_path)
    gated = Gated(Gate(fail=True))
    accelerator.register_for_checkpointing(gated)
    target = Path(accelerator.save_state(async_save=True))  # staging succeeds
    writer = accelerator.checkpoints.async_writer
    deadline = time.monotonic() + 30
    while writer.pending and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not writer.pending
    assert not target.exists() and not layout.temporary_dir(target).exists()
    inputs, targets = next(iter(loader))
    loss = F.cross_entropy(model(inputs), targets)
    with pytest.raises(CheckpointError, match="disk full"):
        accelerator.backward(loss)
    accelerator.backward(
        F.cross_entropy(model(inputs), targets)
    )  # raised once, then training goes on
    gated.gate = Gate(fail=True)
    accelerator.save_state(async_save=True)
    with pytest.raises(CheckpointError, match="asynchronous save"):
        accelerator.wait_for_everyone()


def test_async_with_accumulation_and_bf16_checkpoint_matches_sync(tmp_path):
    accelerator, model, optimizer, loader, scheduler = _setup(
        gradient_accumulation_steps=2, mixed_precision="bf16"
    )
    _train(accelerator, model, optimizer, loader, scheduler, 5)
    accelerator.save_state(tmp_path / "a", async_save=True)
    accelerator.save_state(tmp_path / "b")
    _same_files(tmp_path / "a", tmp_path / "b")


def test_interpreter_exit_waits_for_the_pending_write(tmp_path):
    script = textwrap.dedent(
        f"""
        import threading, torch
        from torch import nn
        from accel import Accelerator

        class Slow:
            def __deepcopy__(self, memo):
                return self
            def __reduce__(self):
                threading.Event().wait(1.0)  # the write takes a while
                return (int, (0,))

        class Holder:
            def state_dict(self):
                return {{"slow": Slow()}}
            def load_state_dict(self, state):
                pass

        accelerator = Accelerator(cpu=True)
        model = accelerator.prepare(nn.Linear(4, 4))
        accelerator.register_for_checkpointing(Holder())
        accelerator.save_state({str(tmp_path / "ckpt")!r}, async_save=True)
        print("returned", flush=True)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    assert "returned" in result.stdout
    assert manifest.problems(tmp_path / "ckpt") == []
    assert (tmp_path / "ckpt" / "model.safetensors").exists()


def test_next_step_waits_for_the_background_copy(tmp_path):
    """The parameters and Adam moments are copied after save_state returns; a step at once must wait."""
    accelerator = Accelerator(cpu=True)
    torch.manual_seed(0)
    model = nn.Sequential(*[nn.Linear(1024, 1024) for _ in range(4)])  # 16 MB + 32 MB of moments
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model, optimizer = accelerator.prepare(model, optimizer)
    accelerator.backward(model(torch.randn(4, 1024)).square().mean())
    optimizer.step()
    accelerator.save_state(tmp_path / "sync")
    accelerator.save_state(tmp_path / "async", async_save=True)
    optimizer.step()  # changes every parameter and moment in place, at once
    optimizer.step()
    accelerator.wait_for_everyone()
    first = load_file(tmp_path / "sync" / "model.safetensors")
    second = load_file(tmp_path / "async" / "model.safetensors")
    assert all(torch.equal(first[k], second[k]) for k in first)
    assert (tmp_path / "sync" / "optimizer.bin").read_bytes() == (
        tmp_path / "async" / "optimizer.bin"
    ).read_bytes()
