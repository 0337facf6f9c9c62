"""Three replica groups of one process under ``accel launch --ft``; groups 1 and 2 are killed.

Real torchft (its lighthouse and Manager), real gloo over loopback, real torchrun restarts.
Checked: the surviving group never restarts and keeps committing steps while the killed
group is down; each killed group comes back by itself and heals from a live peer (the
lines say so); after each heal its parameters and optimizer state are bitwise equal to its
peers' at every step; every sample of each epoch is trained exactly once; the final loss is
the fault-free run's within 1% (the global batch stays the same when a group is missing).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from accel_ft.testing import FaultRun, analyse, fault_free_loss, heal_lines, lost_lines

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

    run.start()
    progress_while_down = []
    try:
        run.wait_until(lambda: run.committed_steps(0) >= 3, 300, "the first steps")
        for victim in (1, 2):
            before, survivor = starts(victim), run.committed_steps(0)
            run.kill(victim)
            run.wait_until(
                lambda v=victim, b=before: starts(v) > b and run.committed_steps(v) >= 2,
                300,
                f"group {victim} to come back and train",
            )
            progress_while_down.append(run.committed_steps(0) - survivor)
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
    assert not result.digest_mismatches, result.digest_mismatches[:3]
    assert result.healed_steps_checked >= 4  # both healed groups, compared step by step
    for epoch in range(EPOCHS):
        assert sorted(result.trained[epoch]) == list(range(SAMPLES)), f"epoch {epoch}"
    reference = fault_free_loss(SAMPLES, BATCH, GROUPS, EPOCHS, LR)
    assert result.full_loss is not None
    assert abs(result.full_loss - reference) / reference < 0.01, (result.full_loss, reference)
