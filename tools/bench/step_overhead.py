"""Per-step overhead of accel's training loop against a plain PyTorch loop (and Accelerate).

A tiny MLP (32 -> 64 -> 10, batch 16) makes the framework's own Python work visible:
the model's arithmetic costs little, so every extra call in ``prepare``-d objects,
``accumulate`` and ``backward`` shows in the step time.

Three scenarios, each measured on its own (``--scenario``, default all): ``fp32``
(one micro-batch per optimizer step), ``accum4`` (``gradient_accumulation_steps=4``;
the plain loop divides the loss and steps every 4th batch) and ``bf16``
(``mixed_precision="bf16"``; the plain loop runs the forward under
``torch.autocast(dtype=torch.bfloat16)`` and casts the output to fp32, as accel and
Accelerate do).

Every variant runs in this one process, on its own model, optimizer and data loader.
Rounds are interleaved (the order alternates every round) so that machine noise
hits all variants alike; each round is one pass of ``--steps`` steps. The report
gives the median step time of each variant; the median, over rounds, of its time
divided by the plain loop's time in the same round (the target applies to it); and
the ratio of the fastest rounds, a second estimate that machine noise inflates
less. Times are process CPU time by default (``--clock wall`` for wall-clock),
which a busy machine disturbs far less than wall-clock time. ``--control`` adds a
second plain loop whose ratio shows the noise floor.

    uv run python tools/bench/step_overhead.py
    uv run python tools/bench/accelerate_env.py tools/bench/step_overhead.py   # + Accelerate
    uv run python tools/bench/step_overhead.py --profile         # cProfile the accel loop
    uv run python tools/bench/step_overhead.py --per-call        # each accel call, tight loop
    uv run python tools/bench/step_overhead.py --bytecodes       # bytecodes per step, per function
    uv run python tools/bench/step_overhead.py --scenario accum4 --rounds 31

This is a benchmark, not a test: it exits 0 whatever the figures, unless
``--fail-above`` is given.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import io
import pstats
import statistics
import sys
import time
import types
from collections.abc import Callable

import torch
import torch.nn.functional as F
from accelerate_env import ACCELERATE_HINT, has_real_accelerate  # tools/bench/, beside this file
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

TARGET = 1.03
"""accel's step time should stay within 3% of the plain loop's."""

SCENARIOS: dict[str, dict[str, object]] = {
    "fp32": {"gradient_accumulation_steps": 1, "mixed_precision": "no"},
    "accum4": {"gradient_accumulation_steps": 4, "mixed_precision": "no"},
    "bf16": {"gradient_accumulation_steps": 1, "mixed_precision": "bf16"},
}
"""Accelerator arguments of each scenario (the plain loop does the same by hand)."""


def make_model(seed: int) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 10))


def make_optimizer(model: nn.Module, kind: str) -> torch.optim.Optimizer:
    if kind == "adamw":
        return torch.optim.AdamW(model.parameters(), lr=1e-3)
    return torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)


def make_loader(steps: int, batch_size: int, seed: int) -> DataLoader:
    generator = torch.Generator().manual_seed(seed)
    inputs = torch.randn(steps * batch_size, 32, generator=generator)
    targets = torch.randint(0, 10, (steps * batch_size,), generator=generator)
    return DataLoader(
        TensorDataset(inputs, targets),
        batch_size=batch_size,
        shuffle=True,
        generator=torch.Generator().manual_seed(seed),
    )


Round = Callable[[], float]

CLOCK: Callable[[], float] = time.process_time
"""Process CPU time by default: on a shared machine it ignores time spent descheduled."""


def plain_variant(args: argparse.Namespace) -> Round:
    model = make_model(0)
    optimizer = make_optimizer(model, args.optimizer)
    loader = make_loader(args.steps, args.batch_size, 0)
    scenario = SCENARIOS[args.scenario]
    steps = int(scenario["gradient_accumulation_steps"])  # type: ignore[call-overload]

    if scenario["mixed_precision"] == "bf16":

        def run() -> float:
            start = CLOCK()
            for inputs, targets in loader:
                with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
                    outputs = model(inputs)
                loss = F.cross_entropy(outputs.float(), targets)
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
            return CLOCK() - start

    elif steps > 1:

        def run() -> float:
            start = CLOCK()
            last = len(loader) - 1
            for index, (inputs, targets) in enumerate(loader):
                loss = F.cross_entropy(model(inputs), targets) / steps
                loss.backward()
                if (index + 1) % steps == 0 or index == last:
                    optimizer.step()
                    optimizer.zero_grad()
            return CLOCK() - start

    else:

        def run() -> float:
            start = CLOCK()
            for inputs, targets in loader:
                loss = F.cross_entropy(model(inputs), targets)
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
            return CLOCK() - start

    return run


def _framework_variant(accelerator_cls: type, args: argparse.Namespace) -> Round:
    accelerator = accelerator_cls(cpu=True, **SCENARIOS[args.scenario])
    model = make_model(0)
    optimizer = make_optimizer(model, args.optimizer)
    loader = make_loader(args.steps, args.batch_size, 0)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)

    def run() -> float:
        start = CLOCK()
        for inputs, targets in loader:
            with accelerator.accumulate(model):
                loss = F.cross_entropy(model(inputs), targets)
                accelerator.backward(loss)
                optimizer.step()
                optimizer.zero_grad()
        return CLOCK() - start

    return run


def accel_variant(args: argparse.Namespace) -> Round:
    from accel import Accelerator
    from accel.state import AcceleratorState, GradientState

    AcceleratorState._reset_state(True)  # a fresh Accelerator for each scenario
    GradientState._reset_state()
    return _framework_variant(Accelerator, args)


def accelerate_variant(args: argparse.Namespace) -> Round | None:

    if not has_real_accelerate():  # absent, or accel's compat distribution
        return None
    try:
        from accelerate import Accelerator
        from accelerate.state import AcceleratorState, GradientState
    except ImportError:
        return None
    AcceleratorState._reset_state(True)
    GradientState._reset_state()
    return _framework_variant(Accelerator, args)


def measure(variants: dict[str, Round], rounds: int, warmup: int) -> dict[str, list[float]]:
    """Seconds per round of each variant; the order alternates from round to round."""
    names = list(variants)
    for _ in range(warmup):
        for name in names:
            variants[name]()
    times: dict[str, list[float]] = {name: [] for name in names}
    for index in range(rounds):
        order = names if index % 2 == 0 else names[::-1]
        for name in order:
            times[name].append(variants[name]())
    return times


def report(times: dict[str, list[float]], steps: int) -> dict[str, float]:
    """Print the table; return each variant's median ratio to the plain loop."""
    base = times["plain"]
    ratios: dict[str, float] = {}
    accelerate = times.get("accelerate")
    print(
        f"{'variant':<12}{'median µs/step':>16}{'min µs/step':>14}"
        f"{'ratio (median)':>17}{'ratio of mins':>16}{'vs Accelerate':>16}"
    )
    for name, values in times.items():
        per_round = [v / b for v, b in zip(values, base)]
        ratios[name] = statistics.median(per_round)
        versus = "-"
        if accelerate is not None:
            versus = f"{statistics.median(v / a for v, a in zip(values, accelerate)):.3f}x"
        print(
            f"{name:<12}{statistics.median(values) / steps * 1e6:>16.1f}"
            f"{min(values) / steps * 1e6:>14.1f}{ratios[name]:>16.3f}x"
            f"{min(values) / min(base):>15.3f}x{versus:>16}"
        )
    return ratios


def profile_accel(args: argparse.Namespace) -> None:
    """cProfile ``--profile-rounds`` rounds of the accel loop; print accel's own functions."""
    run = accel_variant(args)
    run()  # warm-up
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(args.profile_rounds):
        run()
    profiler.disable()
    calls = args.profile_rounds * args.steps
    buffer = io.StringIO()
    stats = pstats.Stats(profiler, stream=buffer)
    stats.sort_stats("tottime").print_stats(25)
    print(f"cProfile of {calls} accel steps, top functions by own time:")
    print(buffer.getvalue())
    buffer = io.StringIO()
    stats = pstats.Stats(profiler, stream=buffer)
    stats.sort_stats("cumulative").print_stats(r"accel/", 30)
    print("accel functions by cumulative time:")
    print(buffer.getvalue())


class _NoOpLoss:
    """A stand-in for a loss tensor whose ``backward`` does nothing (``--per-call``)."""

    def __truediv__(self, other: object) -> _NoOpLoss:
        return self

    def backward(self, **kwargs: object) -> None:
        return None


class _NoOpSGD(torch.optim.SGD):
    """An SGD whose ``step`` and ``zero_grad`` do nothing: what is left is the wrapper's cost."""

    def step(self, closure: object = None) -> None:  # type: ignore[override]
        return None

    def zero_grad(self, set_to_none: bool = True) -> None:
        return None


def _per_call(function: Callable[[], object], baseline: Callable[[], object], calls: int) -> float:
    """Median over 5 repeats of (``function`` - ``baseline``) thread CPU time per call, in µs."""
    results = []
    for _ in range(5):
        start = time.thread_time()
        for _ in range(calls):
            function()
        middle = time.thread_time()
        for _ in range(calls):
            baseline()
        results.append(((middle - start) - (time.thread_time() - middle)) / calls * 1e6)
    return statistics.median(results)


def _step_call_costs(scenario: str, calls: int) -> dict[str, float]:
    """µs per call of ``accumulate``, ``backward``, ``step`` and ``zero_grad`` in one scenario."""
    from accel import Accelerator
    from accel.state import AcceleratorState, GradientState

    AcceleratorState._reset_state(True)
    GradientState._reset_state()
    accelerator = Accelerator(cpu=True, **SCENARIOS[scenario])  # type: ignore[arg-type]
    model = make_model(0)
    raw = _NoOpSGD(model.parameters(), lr=0.01)
    model, optimizer = accelerator.prepare(model, _NoOpSGD(model.parameters(), lr=0.01))
    loss = _NoOpLoss()

    def accumulate() -> None:
        with accelerator.accumulate(model):
            pass

    def nothing() -> None:
        return None

    return {
        "with accelerator.accumulate(model)": _per_call(accumulate, nothing, calls),
        "accelerator.backward(loss)": _per_call(
            lambda: accelerator.backward(loss), loss.backward, calls
        ),
        "optimizer.step()": _per_call(optimizer.step, raw.step, calls),
        "optimizer.zero_grad()": _per_call(optimizer.zero_grad, raw.zero_grad, calls),
    }


def per_call_costs(args: argparse.Namespace) -> None:
    """Print the cost of each accel call of the step in a tight loop, the torch work replaced by no-ops.

    Each figure is accel's call minus the same call without accel (the no-op optimizer's own
    ``step``, the loss's own ``backward``, an empty function, a plain DataLoader), in thread
    CPU time over 20,000 calls, median of 5 repeats.
    """
    from accel import Accelerator
    from accel.state import AcceleratorState, GradientState

    calls = 20_000
    for scenario in ("fp32", "accum4"):
        for name, cost in _step_call_costs(scenario, calls).items():
            print(f"{scenario:<8}{name:<40}{cost:>8.2f} µs per call")
    plain = make_loader(calls // 16, args.batch_size, 0)
    AcceleratorState._reset_state(True)
    GradientState._reset_state()
    prepared = Accelerator(cpu=True).prepare(make_loader(calls // 16, args.batch_size, 0))
    per_batch = []
    for _ in range(5):
        start = time.thread_time()
        for _ in prepared:
            pass
        middle = time.thread_time()
        for _ in plain:
            pass
        per_batch.append(((middle - start) - (time.thread_time() - middle)) / len(plain) * 1e6)
    print(
        f"{'':<8}{'prepared loader, per batch':<40}{statistics.median(per_batch):>8.2f} µs per call"
    )


def _bytecodes(run: Round) -> collections.Counter:
    """Python bytecodes executed by one round of ``run``, per (file, function) (``sys.settrace``)."""
    counts: collections.Counter = collections.Counter()

    def trace(frame: types.FrameType, event: str, arg: object) -> Callable | None:
        frame.f_trace_opcodes = True
        frame.f_trace_lines = False

        def local(frame: types.FrameType, event: str, arg: object) -> Callable:
            if event == "opcode":
                code = frame.f_code
                where = code.co_filename.split("site-packages/")[-1].split("/src/")[-1]
                counts[(where, code.co_name)] += 1
            return local

        return local

    run()  # warm: the first round builds iterators and caches
    sys.settrace(trace)
    try:
        run()
    finally:
        sys.settrace(None)
    return counts


def bytecode_counts(args: argparse.Namespace) -> None:
    """Print the Python bytecodes per step of the plain and the accel loop, and where they differ."""
    plain, accel = _bytecodes(plain_variant(args)), _bytecodes(accel_variant(args))
    steps = args.steps
    extra = sum(accel.values()) - sum(plain.values())
    print(
        f"bytecodes per step: plain {sum(plain.values()) / steps:.0f}, accel "
        f"{sum(accel.values()) / steps:.0f} ({extra / steps:+.0f}, "
        f"{extra / sum(plain.values()):+.1%})"
    )
    difference = {key: accel[key] - plain[key] for key in set(plain) | set(accel)}
    for (where, name), count in sorted(difference.items(), key=lambda item: -abs(item[1]))[:15]:
        if count:
            print(f"{count / steps:>+9.1f}  {where}:{name}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15, help="measured rounds per variant")
    parser.add_argument("--steps", type=int, default=200, help="training steps per round")
    parser.add_argument("--warmup", type=int, default=2, help="unmeasured rounds per variant")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--optimizer", choices=["sgd", "adamw"], default="sgd")
    parser.add_argument(
        "--scenario",
        choices=[*SCENARIOS, "all"],
        default="all",
        help="fp32, accum4 (gradient_accumulation_steps=4), bf16 (autocast), or all (default)",
    )
    parser.add_argument(
        "--threads", type=int, default=1, help="torch intra-op threads (1 keeps noise low)"
    )
    parser.add_argument(
        "--clock",
        choices=["cpu", "wall"],
        default="cpu",
        help="cpu: process CPU time (robust on a busy machine); wall: perf_counter",
    )
    parser.add_argument(
        "--control",
        action="store_true",
        help="add a second plain loop: its ratio (ideally 1.000x) shows the noise floor",
    )
    parser.add_argument("--no-accelerate", action="store_true", help="skip Accelerate")
    parser.add_argument("--profile", action="store_true", help="cProfile the accel loop instead")
    parser.add_argument("--profile-rounds", type=int, default=10)
    parser.add_argument(
        "--per-call",
        action="store_true",
        help="cost of each accel call in a tight loop (torch work replaced by no-ops), instead",
    )
    parser.add_argument(
        "--bytecodes",
        action="store_true",
        help="Python bytecodes per step of the plain and the accel loop (sys.settrace), instead",
    )
    parser.add_argument(
        "--fail-above",
        type=float,
        default=None,
        help="exit 1 if accel's median ratio exceeds this (e.g. 1.10)",
    )
    args = parser.parse_args(argv)
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    torch.set_num_threads(args.threads)

    scenarios = list(SCENARIOS) if args.scenario == "all" else [args.scenario]
    if args.per_call:
        per_call_costs(args)
        return 0
    if args.bytecodes:
        for scenario in scenarios:
            print(f"== scenario {scenario}")
            bytecode_counts(argparse.Namespace(**{**vars(args), "scenario": scenario}))
        return 0
    if args.profile:
        for scenario in scenarios:
            print(f"== scenario {scenario}")
            profile_accel(argparse.Namespace(**{**vars(args), "scenario": scenario}))
        return 0

    print(
        f"torch {torch.__version__}, {args.threads} thread(s), {args.clock} clock, MLP 32-64-10, "
        f"batch {args.batch_size}, {args.optimizer}, {args.rounds} rounds x {args.steps} steps "
        f"(+{args.warmup} warm-up) per scenario"
    )
    worst = 0.0
    for scenario in scenarios:
        print(f"\n== scenario {scenario}: {SCENARIOS[scenario]}")
        ratio = run_scenario(argparse.Namespace(**{**vars(args), "scenario": scenario}))
        worst = max(worst, ratio)
    if args.fail_above is not None and worst > args.fail_above:
        return 1
    return 0


def run_scenario(args: argparse.Namespace) -> float:
    """Measure and report one scenario; return accel's median ratio to the plain loop."""
    variants: dict[str, Round] = {"plain": plain_variant(args)}
    if args.control:
        variants["plain-again"] = plain_variant(args)
    variants["accel"] = accel_variant(args)
    if not args.no_accelerate:
        accelerate = accelerate_variant(args)
        if accelerate is not None:
            variants["accelerate"] = accelerate
        else:
            print("Accelerate is not in this environment: " + ACCELERATE_HINT + "\n")
    torch.set_num_threads(args.threads)  # in case a framework changed it
    times = measure(variants, args.rounds, args.warmup)
    ratios = report(times, args.steps)
    verdict = "meets" if ratios["accel"] <= TARGET else "misses"
    print(f"accel {verdict} the target ratio <= {TARGET:.2f}x ({ratios['accel']:.3f}x)")
    return ratios["accel"]


if __name__ == "__main__":
    sys.exit(main())
