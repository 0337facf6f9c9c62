"""accelerator.throughput in one process: what is counted, what is not, and what is unknown."""

from __future__ import annotations

import copy
import json
import pickle

import pytest
import torch
from accel import Accelerator, ThroughputKwargs
from accel.throughput import summary
from accel.throughput.monitor import batch_counts


class Tokens(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(32, 8)
        self.out = torch.nn.Linear(8, 32)

    def forward(self, input_ids, attention_mask=None):
        return self.out(self.embed(input_ids)).mean()


def _batch(size=4, length=6, real=4):
    mask = torch.zeros(size, length, dtype=torch.long)
    mask[:, :real] = 1
    return {"input_ids": torch.randint(0, 32, (size, length)), "attention_mask": mask}


def _setup(**options):
    accelerator = Accelerator(kwargs_handlers=[ThroughputKwargs(**options)])
    model = Tokens()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model, optimizer = accelerator.prepare(model, optimizer)
    return accelerator, model, optimizer


def _step(accelerator, model, optimizer, batch):
    accelerator.backward(model(**batch))
    optimizer.step()
    optimizer.zero_grad()


def test_real_clock_rates_agree_with_the_counts_and_mfu_is_unknown_on_cpu():
    accelerator, model, optimizer = _setup(log_every=3)
    monitor = accelerator.throughput
    monitor.measure_flops(model, **_batch())
    for _ in range(4):  # the first is warm-up; the report comes after 3 more
        _step(accelerator, model, optimizer, _batch())
    m = monitor.metrics
    assert m["throughput/steps_per_second"] > 0
    # one process: the window's counts over its time, whatever that time was
    assert m["throughput/samples_per_second"] == pytest.approx(4 * m["throughput/steps_per_second"])
    assert m["throughput/tokens_per_second"] == pytest.approx(16 * m["throughput/steps_per_second"])
    assert m["throughput/flops_per_step"] == pytest.approx(4 * monitor.flops_per_sample)
    assert "throughput/mfu" not in m and monitor.peak_flops is None  # a CPU: no invented peak
    record = monitor.summary()
    assert record["steps"] == 4 and record["timed_steps"] == 3 and record["samples"] == 12
    assert record["tokens"] == 48 and record["peak_flops"] is None and record["dtype"] == "fp32"
    line = summary.summary_line([record])
    assert (
        line.startswith("throughput: 4 optimizer steps, ") and "MFU unknown (no dense peak" in line
    )


def test_evaluation_forwards_and_paused_ones_are_not_counted():
    accelerator, model, optimizer = _setup(warmup_steps=0)
    monitor = accelerator.throughput
    model.eval()
    with torch.no_grad():
        model(**_batch())
    model.train()
    with monitor.paused():
        model(**_batch())
    monitor.measure_flops(model, **_batch())  # its own forward is not training work either
    assert monitor.summary()["samples"] == 0
    _step(accelerator, model, optimizer, _batch(size=3))
    assert monitor.summary()["samples"] == 3 and monitor.steps == 1


def test_update_replaces_counting_from_forwards_and_rewind_forgets_an_attempt():
    accelerator, model, optimizer = _setup(warmup_steps=0)
    monitor = accelerator.throughput
    monitor.update(samples=2, tokens=torch.tensor(7))
    _step(accelerator, model, optimizer, _batch(size=4))  # not counted from now on
    assert (monitor.summary()["samples"], monitor.summary()["tokens"]) == (2, 7)
    mark = monitor.mark()
    monitor.update(samples=5, tokens=11)  # an attempt that ran out of memory and is retried
    monitor.rewind(mark)
    monitor.update(samples=5, tokens=torch.tensor(11))
    record = monitor.summary()
    assert (record["samples"], record["tokens"]) == (7, 18)
    monitor.update(samples=1)  # no token count: tokens are unknown, not zero
    assert monitor.summary()["tokens"] is None


def test_a_given_peak_gives_mfu_and_the_hooks_do_not_travel_with_copies(tmp_path):
    accelerator, model, optimizer = _setup(warmup_steps=0, log_every=1, peak_flops=1e9)
    monitor = accelerator.throughput
    monitor.flops_per_sample = 1000.0
    now = [0.0]
    monitor.clock = lambda: now[0]
    model(**_batch())  # the clock starts at the first counted forward (no warm-up)
    now[0] = 2.0
    accelerator.backward(model(**_batch()))
    optimizer.step()
    assert monitor.metrics["throughput/flops_per_second"] == pytest.approx(8 * 1000 / 2.0)
    assert monitor.metrics["throughput/mfu"] == pytest.approx(8 * 1000 / 2.0 / 1e9)
    clone = copy.deepcopy(model)
    clone(**_batch())
    pickle.loads(pickle.dumps(model))(**_batch())
    assert monitor.summary()["samples"] == 8  # the copies' hooks do nothing
    record = summary.write_record(tmp_path, monitor.summary())
    assert json.loads(record.read_text())["peak_flops"] == 1e9


def test_disabled_installs_nothing():
    accelerator, model, optimizer = _setup(enabled=False)
    assert not model._forward_pre_hooks
    _step(accelerator, model, optimizer, _batch())
    assert accelerator.throughput.steps == 0


def test_batch_counts():
    b = _batch(size=3, length=5, real=2)
    samples, tokens = batch_counts((), b)
    assert samples == 3 and int(tokens) == 6
    assert batch_counts((b,), {})[0] == 3  # a dict as the one argument
    assert batch_counts((), {"input_ids": b["input_ids"]}) == (3, 15)
    assert batch_counts((torch.randn(7, 2),), {}) == (7, None)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"log_every": 0}, "log_every=0"),
        ({"warmup_steps": -1}, "warmup_steps=-1"),
        ({"peak_flops": 0}, "peak_flops=0"),
    ],
)
def test_bad_settings_say_what_to_give(options, message):
    with pytest.raises(ValueError, match=message):
        ThroughputKwargs(**options)


def test_the_record_folder_is_the_declared_setting(monkeypatch, tmp_path):
    assert summary.record_directory() is None
    monkeypatch.setenv("ACCEL_THROUGHPUT_DIR", str(tmp_path))
    assert summary.record_directory() == str(tmp_path)


def test_the_run_is_summed_over_the_records():
    base = {"steps": 10, "timed_steps": 9, "peak_flops": 100.0, "device": "x", "dtype": "bf16"}
    records = [
        {**base, "rank": 0, "samples": 90, "tokens": 900, "flops": 900.0, "seconds": 3.0},
        {**base, "rank": 1, "samples": 90, "tokens": 600, "flops": 900.0, "seconds": 2.5},
    ]
    run = summary.combine(records)
    assert run["samples_per_second"] == 60.0 and run["tokens_per_second"] == 500.0
    assert run["mfu"] == pytest.approx(1800 / 3.0 / 200.0)
    assert summary.summary_line(records) == (
        "throughput: 10 optimizer steps, 60.0 samples/s, 500 tokens/s, MFU 300%"
    )
    records[1]["flops"] = None
    assert summary.summary_line(records).endswith("MFU unknown (FLOPs not measured: "
        "call accelerator.throughput.measure_flops(model, **batch))")  # fmt: skip
    assert summary.summary_line([]) is None
    one = [{**base, "rank": 0, "steps": 1, "timed_steps": 0, "samples": 0, "tokens": 0,
            "flops": 0.0, "seconds": 0.0}]  # fmt: skip
    assert "too few steps to time (the first 1 are warm-up)" in summary.summary_line(one)


class _CommitGatedWrapper(torch.optim.Optimizer):
    """Like torchft's OptimizerWrapper: an Optimizer subclass that skips ``Optimizer.__init__``
    and steps the real optimizer (``.optim``) only when told to."""

    def __init__(self, optim: torch.optim.Optimizer):
        self.optim = optim
        self.commit = True

    def step(self, closure=None):
        if self.commit:
            self.optim.step()

    def zero_grad(self, set_to_none: bool = True) -> None:
        self.optim.zero_grad(set_to_none)


def test_steps_are_counted_on_the_optimizer_under_a_wrapper_without_hook_table():
    """A wrapper without ``Optimizer.__init__`` is unwrapped: only the steps taken count."""
    accelerator = Accelerator(cpu=True)
    model = torch.nn.Linear(2, 1)
    wrapper = _CommitGatedWrapper(torch.optim.SGD(model.parameters(), lr=0.1))
    model, optimizer = accelerator.prepare(model, wrapper)
    for commit in (True, False, True):
        wrapper.commit = commit
        accelerator.backward(model(torch.ones(4, 2)).sum())
        optimizer.step()
        optimizer.zero_grad()
    assert accelerator.throughput.steps == 2
