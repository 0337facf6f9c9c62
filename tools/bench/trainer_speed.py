"""transformers' ``Trainer`` steps per second on accel against Accelerate, side by side.

Both variants run on the workspace's interpreter with the same third-party packages (what is
installed changes what transformers does per step: with peft present, for one, ``Trainer``
checks every model for adapters). accel's run imports ``accelerate`` from the accelerate-compat
distribution; Accelerate's puts a folder holding only real Accelerate 1.15 (taken from the
reference venv of tools/accelerate_reference.py, built on first use) first on ``PYTHONPATH``,
which shadows the compat package. Each round starts one child process per variant, alternating which goes first; a child trains a
tiny model with ``Trainer`` and times the steps after a warm-up (process CPU time by default,
``--clock wall`` for wall-clock), so imports and model building are not counted. The report
gives each variant's median steps per second and the median, over rounds, of accel's rate
divided by Accelerate's in the same round (the target: at least 1.0).

``--lean`` runs both variants in a lean venv instead (``.cache/trainer-speed-lean``, rebuilt on
each run by tools/check_compat_install.py's steps): torch, transformers and the compat
distribution installed from its built wheels, nothing else. Accelerate looks up package
metadata in every optimizer step, which costs more the more distributions are installed, so
the two environments give different figures; the report says how many each child saw.

    uv run python tools/bench/trainer_speed.py                      # tiny BERT and GPT-2
    uv run python tools/bench/trainer_speed.py --model gpt2 --rounds 9 --steps 200
    uv run python tools/bench/trainer_speed.py --lean --rounds 11

A benchmark, not a test: it exits 0 whatever the figures.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

CHILD = """
import json, os, sys, tempfile, time
os.environ["HF_HUB_OFFLINE"] = "1"
import torch
torch.set_num_threads(1)
import importlib.metadata
from transformers import (BertConfig, BertForSequenceClassification, GPT2Config, GPT2LMHeadModel,
                          Trainer, TrainerCallback, TrainingArguments)

model_name, steps, warmup, clock = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
now = time.process_time if clock == "cpu" else time.perf_counter
torch.manual_seed(0)
g = torch.Generator().manual_seed(1)
rows = (steps + warmup) * 8
if model_name == "bert":
    model = BertForSequenceClassification(BertConfig(vocab_size=128, hidden_size=32,
        num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, max_position_embeddings=64))
    ids = torch.randint(0, 128, (rows, 32), generator=g)
    data = [{"input_ids": row, "labels": row[0] % 2} for row in ids]
else:
    model = GPT2LMHeadModel(GPT2Config(vocab_size=128, n_positions=64, n_embd=32, n_layer=2, n_head=2))
    ids = torch.randint(0, 128, (rows, 32), generator=g)
    data = [{"input_ids": row, "labels": row} for row in ids]  # a list: no datasets needed

marks = {}
class Clock(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        if "start" not in marks and state.global_step >= warmup:
            marks["start"], marks["at"] = now(), state.global_step
    def on_train_end(self, args, state, control, **kwargs):
        marks["end"] = now()
        marks["steps"] = state.global_step

with tempfile.TemporaryDirectory() as out:
    args = TrainingArguments(output_dir=out, per_device_train_batch_size=8, max_steps=steps + warmup,
        logging_steps=10, report_to=[], use_cpu=True, disable_tqdm=True, save_strategy="no", seed=0,
        dataloader_num_workers=0)
    Trainer(model=model, args=args, train_dataset=data, callbacks=[Clock()]).train()
timed = marks["steps"] - marks["at"]
import accelerate
print(json.dumps({"steps_per_s": timed / (marks["end"] - marks["start"]),
                  "accelerate": accelerate.__version__,
                  "accel": accelerate.Accelerator.__module__.startswith("accel."),
                  "distributions": len(list(importlib.metadata.distributions()))}))
"""


def accelerate_overlay() -> Path:
    """A folder with only real Accelerate's package and metadata, linked from the reference venv."""
    import accelerate_reference as ref

    python = ref.ensure_venv(ref.VENV, ref.requirements_for([]))
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()
    )  # fmt: skip
    overlay = ref.VENV.parent / "overlay"
    overlay.mkdir(exist_ok=True)
    for entry in [site / "accelerate", *site.glob("accelerate-*.dist-info")]:
        link = overlay / entry.name
        if not link.exists():
            link.symlink_to(entry, target_is_directory=True)
    return overlay


def lean_python() -> Path:
    """The interpreter of a new venv with torch, transformers and the compat wheels only."""
    import check_compat_install as install

    root = ROOT / ".cache" / "trainer-speed-lean"
    wheels = root / "wheels"
    shutil.rmtree(wheels, ignore_errors=True)
    wheels.mkdir(parents=True)
    install.build_wheels(wheels)
    return install.install_venv(root / "venv", wheels, root / "constraints.txt", ("transformers",))


def child(
    python: Path, overlay: Path | None, model: str, steps: int, warmup: int, clock: str
) -> dict:
    """The report of one child run (steps per second, ...); ``overlay`` first on PYTHONPATH when given."""
    import accelerate_reference as ref

    with tempfile.TemporaryDirectory() as home:
        env = ref.clean_env(Path(home))
        if overlay is not None:
            env["PYTHONPATH"] = str(overlay)
        result = ref.run(
            [str(python), "-c", CHILD, model, str(steps), str(warmup), clock], env, timeout=900
        )
    if result.returncode != 0:
        raise SystemExit(f"child failed:\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}")
    report = json.loads(result.stdout.strip().splitlines()[-1])
    if report["accel"] != (overlay is None):
        raise SystemExit(f"the child imported the wrong accelerate: {report['accelerate']}")
    return report


def main() -> int:
    """Run the rounds and print the medians."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=["bert", "gpt2"], action="append")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=150, help="timed steps per run")
    parser.add_argument("--warmup", type=int, default=20, help="untimed steps first")
    parser.add_argument("--clock", choices=["cpu", "wall"], default="cpu")
    parser.add_argument(
        "--lean", action="store_true", help="in a venv of torch + transformers only"
    )
    args = parser.parse_args()
    if args.lean:
        python = lean_python()
    else:
        import accelerate

        if not accelerate.Accelerator.__module__.startswith("accel."):
            raise SystemExit(
                "run this in the workspace: its accelerate must be accel's compat package"
            )
        python = Path(sys.executable)
    variants = {"accel": None, "Accelerate": accelerate_overlay()}
    print(f"interpreter: {python}\nAccelerate 1.15 from: {variants['Accelerate']}")
    print(f"{args.rounds} rounds x {args.steps} steps ({args.warmup} warm-up), {args.clock} time\n")
    for model in args.model or ["bert", "gpt2"]:
        rates: dict[str, list[float]] = {name: [] for name in variants}
        seen: dict[str, int] = {}
        for round_index in range(args.rounds):
            order = list(variants) if round_index % 2 == 0 else list(reversed(variants))
            for name in order:
                report = child(python, variants[name], model, args.steps, args.warmup, args.clock)
                rates[name].append(report["steps_per_s"])
                seen[name] = report["distributions"]
        ratios = [a / b for a, b in zip(rates["accel"], rates["Accelerate"])]
        print(
            f"{model}: (installed distributions: "
            + ", ".join(f"{n} {c}" for n, c in seen.items())
            + ")"
        )
        for name, values in rates.items():
            print(f"  {name:10} {statistics.median(values):8.1f} steps/s  (rounds: "
                  + ", ".join(f"{v:.1f}" for v in values) + ")")  # fmt: skip
        print(f"  accel / Accelerate: {statistics.median(ratios):.3f}x (median of rounds)\n")
    return 0


if __name__ == "__main__":
    started = time.monotonic()
    status = main()
    print(f"({time.monotonic() - started:.0f} s)")
    sys.exit(status)
