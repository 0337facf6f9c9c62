"""The arithmetic of a resume on another number of processes (accel.elastic.plan) and the
RNG seeds of ranks a resize adds (accel.rng.derived_seed)."""

from __future__ import annotations

import pytest
import torch
from accel.elastic.plan import plan_resume, resume_line, step_meta
from accel.errors import ResumeError
from accel.rng import derived_seed


def _meta(n, steps, step=12):
    return {"step": step, **step_meta(n, steps, n)}


@pytest.mark.parametrize(
    "saved, steps, now, expected",
    [(2, 1, 1, 2), (1, 2, 2, 1), (2, 2, 4, 1), (4, 1, 2, 2), (3, 2, 2, 3)],
)
def test_keeping_the_global_batch_rederives_the_accumulation(saved, steps, now, expected):
    plan = plan_resume(_meta(saved, steps), saved, now, 7, False, True)
    assert plan.resized and plan.accumulation_steps == expected
    assert plan.step == 12 // steps * expected  # the same optimizer step, counted anew
    assert plan.scheduler_steps == saved  # the schedule advances as the saving run's did


def test_without_the_option_the_run_keeps_its_own_steps():
    plan = plan_resume(_meta(2, 1), 2, 1, 3, False, False)
    assert plan.accumulation_steps == 3 and plan.scheduler_steps is None and plan.step == 12


def test_split_batches_keeps_the_global_batch_by_itself():
    plan = plan_resume(_meta(2, 2), 2, 4, 2, True, True)
    assert plan.accumulation_steps == 2 and plan.scheduler_steps is None


def test_same_size_is_no_resize():
    assert not plan_resume(_meta(2, 2), 2, 2, 2, False, True).resized


def test_an_indivisible_global_batch_names_the_sizes_that_work():
    with pytest.raises(ResumeError) as info:
        plan_resume(_meta(2, 3), 2, 4, 3, False, True)
    assert str(info.value).endswith("resume on 1, 2, 3, 6 processes")


def _sized(n, batch, steps, step=12):
    return {"step": step, **step_meta(n, steps, n, n * batch)}


@pytest.mark.parametrize(
    "saved, now, expected",
    [
        ((2, 4, 2), (1, 8), 2),  # 2 x 4 x 2 = 16 samples: 1 x 8 x 2, not 4 steps (global 32)
        ((1, 8, 2), (2, 4), 2),  # the other direction
        ((2, 4, 2), (2, 8), 1),  # same processes, a larger batch
        ((2, 4, 1), (4, 1), 2),
    ],
)
def test_the_accumulation_is_derived_from_samples(saved, now, expected):
    (n, batch, steps), (m, batch_now) = saved, now
    plan = plan_resume(_sized(n, batch, steps), n, m, 1, False, True, m * batch_now)
    assert plan.resized and plan.accumulation_steps == expected
    assert m * batch_now * plan.accumulation_steps == n * batch * steps  # the global batch
    assert plan.step == 12 // steps * expected
    line = resume_line(plan, [])
    assert f"with per-process batch {batch_now} instead of {batch}" in line


def test_a_batch_that_cannot_make_up_the_global_batch_names_the_sizes_that_work():
    with pytest.raises(ResumeError) as info:  # 16 samples; 1 process of batch 6
        plan_resume(_sized(2, 4, 2), 2, 1, 1, False, True, 6)
    assert str(info.value) == (
        "keep_global_batch_size: the checkpoint's global batch is 2 processes x batch 4 x 2 "
        "accumulation steps = 16 samples, which 1 processes x batch 6 cannot make up in whole "
        "accumulation steps; resume on 1 processes of batch 1, 2, 4, 8, 16"
    )
    with pytest.raises(ResumeError) as info:  # 8 samples; 2 processes of batch 2 would do
        plan_resume(_sized(2, 4, 1), 2, 2, 1, False, True, 2 * 8)
    assert str(info.value).endswith(
        "resume on 1 processes of batch 8 or on 2 processes of batch 1, 2, 4"
    )


def test_an_older_checkpoint_without_batch_sizes_counts_per_process_batches():
    plan = plan_resume(_meta(2, 2), 2, 1, 1, False, True, 8)
    assert plan.accumulation_steps == 4 and plan.saved_batch_size is None


def test_the_resume_line():
    plan = plan_resume(_meta(2, 1), 2, 1, 1, False, True)
    line = resume_line(plan, [{"epoch": 0, "samples_seen": 24}])
    assert line == (
        "checkpoint written by 2 processes, resumed on 1: data position epoch 0, sample 24; "
        "gradient accumulation steps now 2"
    )


def test_new_ranks_get_seeds_of_their_own_that_every_restart_repeats():
    state = torch.manual_seed(3).get_state()
    seeds = {derived_seed(state, rank, 5) for rank in range(2, 6)}
    assert len(seeds) == 4  # ranks differ
    assert derived_seed(state, 2, 5) == derived_seed(state.clone(), 2, 5)  # deterministic
    assert derived_seed(state, 2, 6) != derived_seed(state, 2, 5)  # steps differ
    other = torch.manual_seed(4).get_state()
    assert derived_seed(other, 2, 5) != derived_seed(state, 2, 5)  # runs differ
