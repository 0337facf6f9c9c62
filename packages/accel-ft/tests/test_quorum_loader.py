"""The quorum data loader's arithmetic, step by step, without processes.

The real quorum (torchft's lighthouse and Manager) is exercised by test_kill_and_heal.py;
here a scripted sequence of quorums drives the loader directly, so each rule can be checked
exactly: the global batch stays the same whatever the quorum's size, a step that does not
commit is retrained (or, with ``skip``, its ids are recorded), and the last step of an
epoch is padded from the epoch's start.
"""

from __future__ import annotations

import torch
from accel.state import GradientState
from accel_ft.data import QuorumDataLoader
from accel_ft.session import StepPlan


class ScriptedQuorums:
    """The part of a ReplicaSession the loader uses, following a list of (size, commits)."""

    def __init__(self, script: list[tuple[int, bool]], failed_step: str = "retrain"):
        self.script, self.failed_step = list(script), failed_step
        self.batch_groups, self.plan, self.step, self.listeners = 3, None, 0, []

    def on_commit(self, listener) -> None:
        self.listeners.append(listener)

    def begin_step(self) -> StepPlan:
        if self.plan is None:
            size, self.commits = self.script.pop(0)
            self.plan = StepPlan(step=self.step, rank=0, size=size, members=tuple(range(size)))
        return self.plan

    def close(self) -> None:
        plan, self.plan = self.plan, None
        self.step += self.commits
        for listener in self.listeners:
            listener(plan, self.commits)


def run(script: list[tuple[int, bool]], failed_step: str = "retrain"):
    """Every group's batches of one epoch of 60 samples (batch size 4, 3 batch groups)."""
    data = torch.utils.data.TensorDataset(torch.arange(60))
    source = torch.utils.data.DataLoader(data, batch_size=4, shuffle=True)
    session = ScriptedQuorums(script, failed_step)
    loader = QuorumDataLoader(source, session, 0, 1, None, seed=3, gradient_state=GradientState())
    order = loader.order(0).tolist()
    steps = []
    for (batch,) in loader:
        plan = session.plan
        # every member's share of this step, as the loader gives rank r of the quorum
        shares = []
        for rank in range(plan.size):
            other = StepPlan(plan.step, rank, plan.size, plan.members)
            shares.append(loader._share(torch.tensor(order), other)[0])
        assert batch.tolist() == shares[0]
        steps.append((plan.size, session.commits, shares))
        session.close()
    return loader, order, steps


def test_the_global_batch_stays_and_failed_steps_are_retrained() -> None:
    script = [(3, True), (3, False), (2, True), (2, True), (1, True), (3, True)]
    loader, order, steps = run(script)
    trained = [i for _, commits, shares in steps if commits for share in shares for i in share]
    assert all(sum(len(s) for s in shares) == 12 for _, _, shares in steps)  # 3 groups x 4
    assert trained == order  # in order, each sample once: the failed step's went to the next
    assert [len(s) for s in steps[2][2]] == [6, 6]  # 2 groups: a larger share each
    assert loader.epoch == 1 and loader.samples_seen == 0 and loader.skipped == []


def test_skip_records_the_failed_step_and_moves_on() -> None:
    loader, order, steps = run([(3, True), (2, False), (3, True), (3, True), (3, True)], "skip")
    assert loader.skipped == order[12:24]
    assert loader.epoch == 1


def test_the_last_step_is_padded_from_the_epoch_start() -> None:
    data = torch.utils.data.TensorDataset(torch.arange(30))
    source = torch.utils.data.DataLoader(data, batch_size=4)
    session = ScriptedQuorums([(3, True), (3, True), (3, True)])
    loader = QuorumDataLoader(source, session, 0, 1, None, seed=0, gradient_state=GradientState())
    last = None
    for (batch,) in loader:
        last = (batch.tolist(), loader.end_of_dataloader)
        session.close()
    assert last == ([24, 25, 26, 27], True)
    plan = StepPlan(2, 2, 3, (0, 1, 2))
    loader.samples_seen = 24
    assert loader._share(torch.arange(30), plan)[0] == [2, 3, 4, 5]  # 28, 29, then the start
    assert loader.state_dict()["version"] == 2 and len(loader) == 3
