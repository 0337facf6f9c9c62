"""The same training work split three ways on the processes of one launch, its figures written out.

``run_variant`` trains a tiny token model on 32 variable-length samples, 8 samples per
optimizer step (4 steps), with a clock that advances one second per optimizer step, and
returns what ``accelerator.throughput`` reported at each step, what the tracker received
and the whole-run summary. Run by ``accel launch`` on 2 processes it runs three splits of
that work (micro-batch size x accumulation x processes: 4x1x2, 2x2x2, and 4x1x2 as two
micro-batches of 2) and rank 0 writes them to ``<out>/variants.json``; the test runs the
1-process splits (4x2x1, 8x1x1) in its own process with the same function, measures the
FLOPs there (the workers are given them, sparing each the import of the FLOP counter) and
compares. Run as ``split_worker.py OUT FLOPS_PER_SAMPLE``.
"""

from __future__ import annotations

import contextlib
import json
import sys

import torch
from accel import Accelerator
from accel.throughput import ThroughputKwargs
from accel.tracking import GeneralTracker

VOCAB, LENGTH, WIDTH, SAMPLES = 64, 12, 16, 32
PEAK = 1e9
"""A peak FLOP/s given for the CPU (the table has none): MFU is then known."""


class TokenModel(torch.nn.Module):
    """Embedding, a projection, token-to-token scores (a bmm) and an output layer."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, WIDTH)
        self.proj = torch.nn.Linear(WIDTH, WIDTH)
        self.out = torch.nn.Linear(WIDTH, VOCAB)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        h = self.proj(self.embed(input_ids))
        h = torch.bmm(torch.bmm(h, h.transpose(1, 2)), h) / LENGTH
        logits = self.out(h)
        return (logits.logsumexp(-1) * attention_mask).sum() / attention_mask.sum()


class ListTracker(GeneralTracker):
    """A tracker that keeps what it is given."""

    name = "list"
    requires_logging_directory = False

    def __init__(self) -> None:
        super().__init__()
        self.logged: list[tuple[int | None, dict]] = []

    @property
    def tracker(self) -> list:
        return self.logged

    def store_init_configuration(self, values: dict) -> None:
        pass

    def log(self, values: dict, step: int | None = None, **kwargs) -> None:
        self.logged.append((step, dict(values)))


def dataset() -> list[dict[str, torch.Tensor]]:
    """32 samples of 12 token positions, each with 3 to 12 real tokens (the rest padding)."""
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, VOCAB, (SAMPLES, LENGTH), generator=g)
    lengths = torch.randint(3, LENGTH + 1, (SAMPLES,), generator=g)
    mask = (torch.arange(LENGTH)[None, :] < lengths[:, None]).long()
    return [{"input_ids": ids[i], "attention_mask": mask[i]} for i in range(SAMPLES)]


def real_tokens_per_step(steps: range) -> list[int]:
    """The real tokens of the 8 samples of each optimizer step (whatever the split)."""
    data = dataset()
    return [
        sum(int(data[i]["attention_mask"].sum()) for i in range(8 * s, 8 * s + 8)) for s in steps
    ]


def run_variant(
    batch_size: int,
    accumulation: int,
    micro_batches: int = 1,
    flops_per_sample: float | None = None,
) -> dict:
    """Train the 4 steps with this split; the per-step reports, the tracker's values, the summary.

    FLOPs are measured (``measure_flops``) unless ``flops_per_sample`` gives them.
    """
    tracker = ListTracker()
    options = ThroughputKwargs(
        log_every=1, warmup_steps=1, peak_flops=PEAK, flops_per_sample=flops_per_sample
    )
    accelerator = Accelerator(
        gradient_accumulation_steps=accumulation, log_with=[tracker], kwargs_handlers=[options]
    )
    accelerator.init_trackers("throughput")
    torch.manual_seed(0)
    model = TokenModel()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = torch.utils.data.DataLoader(dataset(), batch_size=batch_size)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    monitor = accelerator.throughput
    now = [0.0]
    monitor.clock = lambda: now[0]  # one second per optimizer step: rates are per-step counts
    if flops_per_sample is None:
        monitor.measure_flops(model, **next(iter(loader)))
    reports = []
    for batch in loader:
        with accelerator.accumulate(model):
            pieces = [
                {k: v[i::micro_batches] for k, v in batch.items()} for i in range(micro_batches)
            ]
            for i, piece in enumerate(pieces):  # the user's own micro-batches of one batch
                last = i == len(pieces) - 1
                with contextlib.nullcontext() if last else accelerator.no_sync(model):
                    accelerator.backward(model(**piece) / micro_batches)
            optimizer.step()
            optimizer.zero_grad()
        if accelerator.sync_gradients:
            reports.append(dict(monitor.metrics))
            now[0] += 1.0
    summary = monitor.summary()
    accelerator.end_training()
    return {
        "split": [batch_size, accumulation, micro_batches, accelerator.num_processes],
        "reports": reports,
        "logged": tracker.logged,
        "summary": summary,
        "flops_per_sample": monitor.flops_per_sample,
    }


def main(out: str, flops_per_sample: float) -> None:
    splits = [(2, 2, 1), (4, 1, 2), (4, 1, 1)]
    results = [run_variant(*split, flops_per_sample=flops_per_sample) for split in splits]
    if torch.distributed.get_rank() == 0:
        with open(f"{out}/variants.json", "w") as f:
            json.dump(results, f)


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]))
