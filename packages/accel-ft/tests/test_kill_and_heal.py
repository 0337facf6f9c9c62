"""Three replica groups of one process under ``accel launch --ft``; groups 1 and 2 are killed.

Real torchft (its lighthouse and Manager), real gloo over loopback, real torchrun restarts.
Each group is killed inside a step (its samples drawn, its gradients not yet averaged).
Checked: the others' step fails and is retrained; the surviving group never restarts and
keeps committing steps while the killed group is down; each killed group comes back by itself and heals from a live peer (the
lines say so); after each heal its parameters and optimizer state are bitwise equal to its
peers' at every step; the learning-rate schedule advanced once per committed step (not on a
step a failure abandoned); every sample of each epoch is trained exactly once; the final
loss is the fault-free run's within 1% (the global batch stays the same when a group is
missing); every server of the run (lighthouse, manager servers, the groups' stores, gloo)
listens on 127.0.0.1 only.

A second, short run checks the stop below the minimum quorum: one group against a
lighthouse that needs two waits ``--ft_quorum_timeout`` and stops the run with one line.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from accel_ft.testing import (
    FaultRun,
    analyse,
    fault_free_loss,
    heal_lines,
    is_loopback,
    listening_sockets,
    lost_lines,
)

pytest.importorskip("accel_cli", reason="accel launch comes with accel-cli")

WORKER = Path(__file__).parent / "workers" / "ft_train.py"
SAMPLES, BATCH, GROUPS, EPOCHS, LR = 1200, 8, 3, 6, 0.05


def test_killed_groups_heal_live_while_the_others_keep_training(tmp_path: Path) -> None:
    hurry = tmp_path / "hurry"
    run = FaultRun(
        WORKER,
        tmp_path / "run",
        groups=GROUPS,
        script_args=[
            *("--samples", str(SAMPLES), "--batch_size", str(BATCH)),
            *("--epochs", str(EPOCHS), "--lr", str(LR)),
            # slow steps until both kills healed, so the run cannot end before
            *("--step_sleep", "0.4", "--slow_until", str(hurry)),
        ],
    )

    def starts(group: int) -> int:
        return sum(1 for r in run.records().get(group, []) if r["event"] == "start")

    def inside_a_step(group: int) -> bool:  # its samples drawn, the step not finished
        rows = run.records().get(group, [])
        return bool(rows) and rows[-1]["event"] == "fetch"

    run.start()
    progress_while_down = []
    listening = []
    try:
        run.wait_until(lambda: run.committed_steps(0) >= 3, 300, "the first steps")
        for victim in (1, 2):
            before, survivor = starts(victim), run.committed_steps(0)
            run.wait_until(lambda v=victim: inside_a_step(v), 60, f"group {victim} in a step")
            run.kill(victim)  # mid-step: the others' step fails, and they retrain its samples
            run.wait_until(
                lambda v=victim, b=before: starts(v) > b and run.committed_steps(v) >= 2,
                300,
                f"group {victim} to come back and train",
            )
            progress_while_down.append(run.committed_steps(0) - survivor)
            assert run.process is not None
            listening.extend(listening_sockets(run.process.pid))
        hurry.write_text("")
        assert run.finish(300) == 0, run.log()[-3000:]
    finally:
        if run.process is not None and run.process.poll() is None:
            run.process.kill()

    result = analyse(run.out, SAMPLES, GROUPS * BATCH)
    log = run.log()
    assert result.starts == {0: 1, 1: 2, 2: 2}  # group 0 never restarted
    assert all(steps > 0 for steps in progress_while_down), progress_while_down
    assert {g for g, *_ in lost_lines(log)} == {1, 2}, log[-3000:]
    # a group slow to start also heals when it first joins: the killed ones must be among them
    healed = {g for g, _, step, _ in heal_lines(log) if step > 0}
    assert {1, 2} <= healed, log[-3000:]
    failed = [r for r in run.records()[0] if r["event"] == "step" and not r["committed"]]
    assert failed, "no step failed: the kills did not land inside a step"
    assert not result.digest_mismatches, result.digest_mismatches[:3]
    assert not result.schedule_mismatches, result.schedule_mismatches[:3]
    # lighthouse, 3 manager servers, 2 stores per group's torchrun (at least), all loopback
    assert len({port for _, _, port in listening}) >= 10, listening
    assert all(is_loopback(address) for _, address, _ in listening), listening
    assert result.healed_steps_checked >= 4  # both healed groups, compared step by step
    for epoch in range(EPOCHS):
        assert sorted(result.trained[epoch]) == list(range(SAMPLES)), f"epoch {epoch}"
    reference = fault_free_loss(SAMPLES, BATCH, GROUPS, EPOCHS, LR)
    assert result.full_loss is not None
    assert abs(result.full_loss - reference) / reference < 0.01, (result.full_loss, reference)


def test_a_run_below_its_minimum_quorum_stops_with_one_line(tmp_path: Path) -> None:
    from torchft._torchft import LighthouseServer

    # a lighthouse other machines would share, wanting 2 groups; this launch brings 1
    lighthouse = LighthouseServer(bind="127.0.0.1:0", min_replicas=2, join_timeout_ms=100)
    port = lighthouse.address().rpartition(":")[2]
    run = FaultRun(
        WORKER,
        tmp_path / "run",
        groups=1,
        flags=[
            *("--ft_lighthouse", f"127.0.0.1:{port}", "--ft_min_replicas", "2"),
            *("--ft_quorum_timeout", "2"),
        ],
    )
    try:
        run.start()
        code = run.finish(300)
    finally:
        lighthouse.shutdown()
    log = run.log()
    lines = [line for line in log.splitlines() if "found no quorum" in line]
    assert code == 1, log[-3000:]
    assert len(lines) == 1 and lines[0].startswith(
        "accel-ft: replica group 0 found no quorum of 2 replica groups within 2 s at step 0: "
        "stopping the run"
    ), log[-3000:]
    assert "Traceback" not in log, log[-3000:]
    # the group started and then trained nothing: it waited for a quorum, and stopped
    rows = run.records()[0]
    assert rows[0]["event"] == "start", rows
    assert not [r for r in rows if r["event"] in ("fetch", "step")], rows
