"""accel-ft under failures: 3 replica groups of 1 process, one killed at random every ~20 s.

    uv run python tools/bench/ft_failures.py [--duration 180] [--interval 20]

Runs ``packages/accel-ft/tests/workers/ft_train.py`` (a small regression, CPU gloo over
loopback) four ways and prints side by side:

1. accel-ft without failures: its steps/s;
2. accel-ft for ``--duration`` seconds with a random group SIGKILLed every ~``--interval`` s:
   steps/s against (1) (target >= 75%), each heal's live-copy time and how long the group
   was down, whether a group that was not killed ever restarted, whether every healed group's
   parameters and optimizer state were bitwise equal to its peers' after each step, whether
   the learning-rate schedule advanced once per committed step, whether each sample was
   trained once per epoch, and the loss curve's deviation from (1) per global batch (the
   same samples in both runs; target < 1%);
3. and 4. the same job on accel's restart-and-resume path (``accel launch --num_processes 3
   --max_restarts``: DDP, ``save_state`` every ``--checkpoint_every`` steps, ``resume()``),
   with and without kills: the time lost per failure, against accel-ft's.

Time lost per failure, both ways: the stalls of new progress after each kill (the failure,
then the restart and resume, or the heal), beyond the usual step time.
On a shared 2-core machine a restarting group's start-up competes with the survivors for
the cores; the figures say so rather than hide it.
"""

from __future__ import annotations

import argparse
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from accel_ft.testing import (
    FaultRun,
    analyse,
    heal_lines,
    is_loopback,
    listening_sockets,
    read_records,
)

ROOT = Path(__file__).resolve().parents[2]
WORKER = ROOT / "packages/accel-ft/tests/workers/ft_train.py"
GROUPS, BATCH = 3, 8


def step_times(out: Path) -> list[tuple[int, float, list[float]]]:
    """(step, time, losses of the groups) of every committed step, in step order."""
    steps: dict[int, tuple[float, list[float]]] = {}
    for rows in read_records(out).values():
        for row in rows:
            if row["event"] == "step" and row["committed"]:
                first, losses = steps.get(row["step"], (row["time"], []))
                steps[row["step"]] = (min(first, row["time"]), losses + [row["loss"]])
    return sorted((s, t, losses) for s, (t, losses) in steps.items())


def rate(points: list[tuple[int, float, list[float]]], skip: int = 10) -> float:
    """Steps per second after the first ``skip`` steps."""
    points = points[skip:]
    return (len(points) - 1) / (points[-1][1] - points[0][1])


def run_clean(out: Path, ft: bool, steps: int, samples: int, extra: list[str]) -> FaultRun:
    """A run of ``steps`` steps without failures."""
    run = FaultRun(WORKER, out, groups=GROUPS, ft=ft, script_args=_args(samples, steps, extra))
    run.start()
    code = run.finish(timeout=3600)
    if code != 0:
        sys.exit(f"the run without failures failed ({code}):\n{run.log()[-2000:]}")
    return run


def _args(samples: int, steps: int, extra: list[str]) -> list[str]:
    return [
        *("--samples", str(samples), "--batch_size", str(BATCH), "--epochs", "1000"),
        *("--max_steps", str(steps), *extra),
    ]


def up_groups(run: FaultRun) -> list[int]:
    """Groups whose current worker has committed a step (a kill would not hit a restarting one)."""
    records = run.records()
    ready = []
    for group in range(GROUPS):
        rows = records.get(group, [])
        starts = [i for i, r in enumerate(rows) if r["event"] == "start"]
        if starts and any(r["event"] == "step" for r in rows[starts[-1] :]):
            ready.append(group)
    return ready


def run_with_kills(
    out: Path,
    ft: bool,
    steps: int,
    samples: int,
    duration: float,
    interval: float,
    extra: list[str],
) -> tuple[FaultRun, float, float, list[tuple[int, str, int]]]:
    """Kill a random running group every ~``interval`` s for ``duration`` s after the first step.

    Also returns the listening sockets of the run's processes, sampled at each kill.
    """
    run = FaultRun(WORKER, out, groups=GROUPS, ft=ft, script_args=_args(samples, steps, extra))
    run.start()
    assert run.process is not None
    listening: list[tuple[int, str, int]] = []
    run.wait_until(lambda: len(step_times(out)) >= 10, 600, "the first steps")
    begin = time.time()
    rng = random.Random(0)
    next_kill = begin + interval * rng.uniform(0.75, 1.25)
    while time.time() < begin + duration and run.process.poll() is None:
        if time.time() >= next_kill:
            ready = up_groups(run)
            if (ft and ready) or (not ft and len(ready) == GROUPS):
                victim = rng.choice(ready)
                listening.extend(listening_sockets(run.process.pid))
                try:
                    run.kill(victim)
                except ProcessLookupError:
                    pass
                next_kill = time.time() + interval * rng.uniform(0.75, 1.25)
        time.sleep(0.2)
    end = time.time()
    code = run.finish(timeout=3600)
    if code != 0:
        sys.exit(f"the run with failures failed ({code}):\n{run.log()[-2000:]}")
    return run, begin, end, listening


def lost_per_failure(
    points: list[tuple[int, float, list[float]]], kills: list[tuple[int, float]], end: float
) -> float:
    """Mean seconds without new progress that each failure caused.

    The progress timeline is the first time each step committed (a step redone after a
    resume is not new progress). After each kill, until the next one, every gap between
    consecutive new steps longer than 3 median gaps counts its excess over the median: the
    stall of the failure itself, of the restart and resume or of the heal.
    """
    times = sorted(t for _, t, _ in points)
    gaps = [b - a for a, b in zip(times, times[1:])]
    if not gaps or not kills:
        return float("nan")
    usual = statistics.median(gaps)
    moments = sorted(t for _, t in kills) + [end]
    lost = 0.0
    for start, stop in zip(moments, moments[1:]):
        inside = [t for t in times if start <= t <= stop]
        before = [t for t in times if t < start]
        timeline = before[-1:] + inside
        for a, b in zip(timeline, timeline[1:]):
            if b - a > 3 * usual:
                lost += (b - a) - usual
    return lost / len(kills)


def main() -> int:
    """Run the four jobs and print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=180.0)
    parser.add_argument("--interval", type=float, default=20.0)
    parser.add_argument(
        "--clean_steps", type=int, default=3000, help="steps of accel-ft's run without failures"
    )
    parser.add_argument(
        "--ddp_clean_steps", type=int, default=600, help="steps of the DDP run without failures"
    )
    parser.add_argument("--checkpoint_every", type=int, default=50)
    parser.add_argument("--samples", type=int, default=48000)
    parser.add_argument("--keep", default=None, help="keep the runs' records here")
    args = parser.parse_args()
    root = Path(args.keep or tempfile.mkdtemp(prefix="ft-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        return _bench(args, root)
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


def _bench(args: argparse.Namespace, root: Path) -> int:
    print("accel-ft: 3 replica groups x 1 process, CPU gloo over loopback", flush=True)
    clean = run_clean(root / "ft-clean", True, args.clean_steps, args.samples, [])
    clean_points = step_times(clean.out)
    clean_rate = rate(clean_points)
    print(f"  without failures: {clean_rate:.2f} steps/s", flush=True)

    # the run outlasts the failure window (with a group down the others may run faster: on a
    # 2-core machine they get its cores)
    steps = int(2 * clean_rate * (args.duration + 60))
    faulty, begin, end, listening = run_with_kills(
        root / "ft-kills", True, steps, args.samples, args.duration, args.interval, []
    )
    points = step_times(faulty.out)
    inside = [s for s, t, _ in points if begin <= t <= end]
    faulty_rate = (max(inside) - min(inside)) / (end - begin)
    kills = len(faulty.kills)
    result = analyse(faulty.out, args.samples, GROUPS * BATCH)
    killed = {g: sum(1 for k, _ in faulty.kills if k == g) for g in range(GROUPS)}
    # a group restarts once per kill at most (a restart after the run ended leaves at once)
    restarted_unkilled = {g for g in range(GROUPS) if result.starts.get(g, 0) > killed[g] + 1}
    heals = [h for h in heal_lines(faulty.log()) if h[2] > 0]
    down = _downtimes(faulty)
    duplicates = {e: len(v) - len(set(v)) for e, v in result.trained.items()}
    complete = [e for e, v in result.trained.items() if len(v) >= args.samples]
    covered = all(sorted(result.trained[e]) == list(range(args.samples)) for e in complete)
    deviation = _curve_deviation(clean_points, points)
    print(
        f"  {kills} kills in {end - begin:.0f} s (one every ~{args.interval:g} s): "
        f"{faulty_rate:.2f} steps/s = {100 * faulty_rate / clean_rate:.0f}% of the run "
        "without failures (target >= 75%)"
    )
    print(
        f"  heals: {len(heals)}, live copy {_stats([h[3] for h in heals])} s; group down "
        f"(kill -> training again) {_stats(down)} s"
    )
    print(
        f"  groups restarted without being killed: {sorted(restarted_unkilled) or 'none'}; "
        f"bitwise equal after heals: {'yes' if not result.digest_mismatches else 'NO'} "
        f"({result.healed_steps_checked} healed steps compared, "
        f"{len(result.digest_mismatches)} mismatches)"
    )
    print(
        "  learning-rate schedule advanced once per committed step (none on a failed step): "
        f"{'yes' if not result.schedule_mismatches else 'NO'} "
        f"({len(result.schedule_mismatches)} mismatches)"
    )
    print(
        f"  samples: duplicates per epoch {duplicates}; complete epochs {complete} each "
        f"sample once: {covered}"
    )
    print(
        f"  loss curve vs without failures, per global batch (step k: the k-th {GROUPS * BATCH} "
        "samples of the global order in both runs, its loss the mean over the groups' equal "
        f"shares), means of 20-step windows over the first {len(clean_points)} steps: "
        f"mean {100 * deviation[0]:.4f}%, max {100 * deviation[1]:.4f}% (target < 1%)"
    )
    print(f"  servers of the run: {_binding(listening)}")
    lost_ft = lost_per_failure(points, faulty.kills, end)

    print("accel's restart-and-resume path: the same job as 3 DDP processes", flush=True)
    extra = ["--checkpoint_every", str(args.checkpoint_every)]
    ddp_clean = run_clean(root / "ddp-clean", False, args.ddp_clean_steps, args.samples, extra)
    ddp_rate = rate(step_times(ddp_clean.out))
    print(f"  without failures: {ddp_rate:.2f} steps/s", flush=True)
    ddp_steps = int(ddp_rate * (args.duration + 60))  # restarts only slow it down
    ddp, begin, end, ddp_listening = run_with_kills(
        root / "ddp-kills", False, ddp_steps, args.samples, args.duration, args.interval, extra
    )
    ddp_points = step_times(ddp.out)
    lost_ddp = lost_per_failure(ddp_points, ddp.kills, end)
    inside = [s for s, t, _ in ddp_points if begin <= t <= end]
    ddp_faulty_rate = (max(inside) - min(inside)) / (end - begin)
    print(
        f"  {len(ddp.kills)} kills in {end - begin:.0f} s: {ddp_faulty_rate:.2f} steps/s = "
        f"{100 * ddp_faulty_rate / ddp_rate:.0f}% (checkpoint every {args.checkpoint_every} "
        "steps, every process restarts and resumes)"
    )
    print(f"  servers of the run: {_binding(ddp_listening)}")
    print(
        f"time lost per failure: accel-ft {lost_ft:.1f} s, restart-and-resume {lost_ddp:.1f} s "
        f"(ratio {lost_ddp / lost_ft if lost_ft > 0 else float('inf'):.1f}x)"
    )
    return 0


def _downtimes(run: FaultRun) -> list[float]:
    """Per kill: seconds until the killed group's next worker committed a step."""
    records = run.records()
    down = []
    for group, when in run.kills:
        after = [
            r["time"]
            for r in records.get(group, [])
            if r["event"] == "step" and r["committed"] and r["time"] > when
        ]
        if after:
            down.append(min(after) - when)
    return down


def _curve_deviation(
    clean: list[tuple[int, float, list[float]]], faulty: list[tuple[int, float, list[float]]]
) -> tuple[float, float]:
    """Mean and max relative deviation of 20-step window means of the per-step loss.

    A step is keyed by its place in the global sample order (the worker's ``step``: the
    committed global batches before it), so step k holds the same samples in both runs,
    whatever the quorum was and however many attempts a failure cost. Its loss is the mean
    of the groups' losses; the groups' shares are equal, so it is the global batch's loss.
    """
    a = {s: statistics.fmean(losses) for s, _, losses in clean}
    b = {s: statistics.fmean(losses) for s, _, losses in faulty}
    common = sorted(set(a) & set(b))
    windows = [common[i : i + 20] for i in range(0, len(common) - 19, 20)]
    if not windows:
        return float("nan"), float("nan")
    devs = []
    for window in windows:
        mean_a = statistics.fmean(a[s] for s in window)
        mean_b = statistics.fmean(b[s] for s in window)
        devs.append(abs(mean_b - mean_a) / mean_a)
    return statistics.fmean(devs), max(devs)


def _binding(listening: list[tuple[int, str, int]]) -> str:
    """Where the run's listening sockets (sampled at each kill) were bound."""
    addresses = sorted({address for _, address, _ in listening})
    others = [a for a in addresses if not is_loopback(a)]
    ports = len({port for _, _, port in listening})
    verdict = "all on loopback" if not others else f"NOT all on loopback: also {others}"
    return f"{ports} listening ports seen, {verdict}"


def _stats(values: list[float]) -> str:
    if not values:
        return "-"
    return f"median {statistics.median(values):.1f} (min {min(values):.1f}, max {max(values):.1f})"


if __name__ == "__main__":
    sys.exit(main())
