"""One replica group's link to the quorum: torchft's Manager, the step in progress, the log lines.

A step is opened by :meth:`ReplicaSession.begin_step` (the data loader calls it before it
draws a batch: the batch depends on who is in the quorum) and closed by
:meth:`ReplicaSession.commit` (the optimizer calls it: it steps only when the quorum agrees).
The quorum is computed synchronously (torchft's ``use_async_quorum=False``), so a group
that is behind receives the whole run state from a live peer before its first batch is
drawn. Membership changes are said in one line each, by the first member of the quorum.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import time
from collections.abc import Callable, Generator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch

logger = logging.getLogger("accel_ft")

STOP_FILE = "stop"
"""In the run folder: the line a group that lost its quorum stopped with (the supervisor stops all)."""
DONE_FILE = "done"
"""In the run folder: written by the supervisor once a group finished the script (a group
restarted after that exits at once)."""
QUORUM_LOST_EXIT = 3
"""Exit status of a worker that waited ``ft_quorum_timeout`` without a quorum."""


@dataclass(frozen=True)
class StepPlan:
    """Who trains the open step: this group's place in the quorum and the quorum's size."""

    step: int
    """Committed steps before this one (torchft's step counter, the same in every group)."""
    rank: int
    """This group's rank among the step's participants (0 .. size - 1)."""
    size: int
    """Replica groups taking part in the step."""
    members: tuple[int, ...]
    """The replica groups taking part, in participant order."""


@contextmanager
def manager_server_bound_to(host: str | None) -> Generator[None]:
    """While inside, torchft's ``Manager`` starts its manager server listening on ``host`` only.

    torchft 0.2.0's ``Manager`` builds its ``ManagerServer`` with ``bind="[::]:PORT"`` and
    offers no argument for the address; the server itself takes any ``HOST:PORT``. So the
    class the Manager looks up is replaced for the duration by one that keeps the port and
    changes the host. ``None``: torchft's default (every interface, for other machines' groups).
    """
    import torchft.manager as manager_module

    server_class = manager_module.ManagerServer
    if host is None:
        yield
        return

    def bound_server(**kwargs: Any) -> Any:
        port = str(kwargs.pop("bind")).rpartition(":")[2]
        return server_class(bind=f"{host}:{port}", **kwargs)

    # a factory with the class's keyword call in the class's place, for the Manager's lookup
    manager_module.ManagerServer = bound_server  # ty: ignore[invalid-assignment]
    try:
        yield
    finally:
        manager_module.ManagerServer = server_class


class ReplicaSession:
    """torchft's :class:`~torchft.Manager` for this process, driven one step at a time.

    ``settings`` is the typed ``ft_config`` section (:data:`accel_ft.config.FT_SECTION`);
    ``group_rank`` / ``group_size`` this process's place in its replica group;
    ``capture`` / ``restore`` give and take the whole run state a healing peer receives.
    """

    def __init__(
        self,
        settings: Mapping[str, Any],
        group_rank: int,
        group_size: int,
        capture: Callable[[], dict],
        restore: Callable[[dict], None],
    ):
        from torchft import Manager, ProcessGroupGloo
        from torchft.checkpointing.pg_transport import PGTransport

        self.group = int(settings.get("ft_replica_group") or 0)
        self.group_rank = group_rank
        self.min_replicas = int(settings["ft_min_replicas"])
        self.quorum_timeout = float(settings["ft_quorum_timeout"])
        self.failed_step = str(settings["ft_failed_step"])
        self.batch_groups = int(settings.get("ft_batch_groups") or settings["ft_replica_groups"])
        """Replica groups whose batches make one global batch (the data loaders read it)."""
        run_dir = settings.get("ft_run_dir")
        self.run_dir = Path(run_dir) if run_dir else None
        self._capture, self._restore = capture, restore
        self._leave_if_finished()
        lighthouse = settings.get("ft_lighthouse")
        if not lighthouse:
            raise RuntimeError(
                "accel-ft: no lighthouse address: run the script with `accel launch --ft ...`"
            )
        timeout = timedelta(seconds=float(settings["ft_timeout"]))
        self.pg = ProcessGroupGloo(timeout=timeout)
        host = lighthouse.split("://", 1)[-1].rpartition(":")[0]
        loopback = host in ("127.0.0.1", "localhost", "[::1]")
        # torchft 0.2's Manager binds its group's manager server to every interface; on one
        # machine (a loopback lighthouse) it serves only local peers: 127.0.0.1
        with manager_server_bound_to("127.0.0.1" if loopback else None):
            self.manager = Manager(
                pg=self.pg,
                load_state_dict=self._load,
                state_dict=self._state,
                min_replica_size=self.min_replicas,
                use_async_quorum=False,
                timeout=timeout,
                quorum_timeout=timedelta(seconds=self.quorum_timeout),
                connect_timeout=timeout,
                rank=group_rank,
                world_size=group_size,
                lighthouse_addr=lighthouse,
                replica_id=f"group{self.group}",
                hostname="127.0.0.1" if loopback else socket.gethostname(),
                # the live copy travels over the groups' own gloo group: no extra server
                checkpoint_transport=PGTransport(
                    self.pg, timeout=timeout, device=torch.device("cpu")
                ),
            )
        self.plan: StepPlan | None = None
        """The open step, or None between steps."""
        self.members: tuple[int, ...] = ()
        """The replica groups of the latest quorum."""
        self.largest = 0
        """The largest quorum seen (the denominator of ``continuing with 2 of 3``)."""
        self.last_committed: bool | None = None
        """Whether the latest step committed (None before the first)."""
        self._healed: tuple[int, float] | None = None  # (source group, seconds) of this step
        self._commit_listeners: list[Callable[[StepPlan, bool], None]] = []

    # -- the state a healing peer receives -----------------------------------------
    def _state(self) -> dict:
        return {"group": self.group, "run": self._capture()}

    def _load(self, state: dict) -> None:
        self._restore(state["run"])
        self._healed = (int(state["group"]), 0.0)

    # -- steps ---------------------------------------------------------------------
    def on_commit(self, listener: Callable[[StepPlan, bool], None]) -> None:
        """Call ``listener(plan, committed)`` when each step closes (the data loaders advance)."""
        self._commit_listeners.append(listener)

    @property
    def quorum_size(self) -> int:
        """Replica groups in the latest quorum (0 before the first)."""
        return len(self.members)

    def begin_step(self) -> StepPlan:
        """Join the next step's quorum (healing from a peer if behind); the open step if one is open."""
        if self.plan is not None:
            return self.plan
        self._leave_if_finished()
        start = time.monotonic()
        self._healed = None
        try:
            self.manager.start_quorum(timeout=timedelta(seconds=self.quorum_timeout))
        except Exception as exc:  # torchft raises its Rust client's timeout as RuntimeError
            self._stop(exc)
        if self._healed is not None:
            self._healed = (self._healed[0], time.monotonic() - start)
        members = self._exchange_members()
        rank = self.manager.participating_rank()
        size = self.manager.num_participants()
        self.plan = StepPlan(
            step=self.manager.current_step(),
            rank=0 if rank is None else int(rank),
            size=max(1, int(size)),
            members=members,
        )
        return self.plan

    def commit(self) -> bool:
        """Whether the open step commits (every group of the quorum finished it); closes it."""
        plan = self.plan if self.plan is not None else self.begin_step()
        committed = bool(self.manager.should_commit())
        self.plan = None
        self.last_committed = committed
        for listener in self._commit_listeners:
            listener(plan, committed)
        return committed

    def _exchange_members(self) -> tuple[int, ...]:
        """Tell every participant who is here (and who healed from whom); log the changes."""
        from torch.distributed.distributed_c10d import AllgatherOptions

        size = max(1, int(self.manager.num_participants()))
        src, seconds = self._healed if self._healed is not None else (-1, 0.0)
        mine = torch.tensor([self.group, src, int(seconds * 1e6)], dtype=torch.int64)
        out = [torch.zeros_like(mine) for _ in range(size)]
        try:
            if self.manager.errored() is None:
                self.pg.allgather([out], [mine], AllgatherOptions()).wait()
            else:
                out = [mine]
        except Exception as exc:  # a member died during the exchange: this step cannot commit
            self.manager.report_error(exc)
            return self.members
        rows = [t.tolist() for t in out]
        members = tuple(row[0] for row in rows)
        self._say(members, rows)
        self.members = members
        self.largest = max(self.largest, len(members))
        return members

    def _say(self, members: tuple[int, ...], rows: list[list[int]]) -> None:
        """One line per membership change, from the quorum's first group only."""
        if self.group_rank != 0 or not members or members[0] != self.group:
            if set(members) != set(self.members):
                self.members = members  # keep the view current on every member
            return
        step = self.manager.current_step()
        total = max(self.batch_groups, self.largest, len(members))  # the groups of the job
        before = set(self.members)
        if not before:
            names = ", ".join(map(str, sorted(members)))
            plural = "s" if len(members) > 1 else ""
            logger.warning(
                f"replica group{plural} {names} in quorum at step {step}: training with "
                f"{len(members)} of {total}"
            )
        for group in sorted(before - set(members)):
            logger.warning(
                f"replica group {group} lost at step {step}: continuing with "
                f"{len(members)} of {total}"
            )
        for group, src, micros in rows:
            if before and group not in before and src < 0:
                logger.warning(
                    f"replica group {group} joined at step {step}: training with "
                    f"{len(members)} of {total}"
                )
            if src >= 0:
                logger.warning(
                    f"replica group {group} healed from group {src} at step {step} "
                    f"(live copy, {micros / 1e6:.1f} s)"
                )

    def _leave_if_finished(self) -> None:
        """A group restarted after another finished the script leaves: the run is done.

        Without this, a group that comes back after its peers ended would find no one to
        heal from and train the whole run again alone.
        """
        if self.run_dir is not None and (self.run_dir / DONE_FILE).exists():
            logger.warning(f"replica group {self.group}: the run has finished; leaving")
            sys.stderr.flush()
            os._exit(0)

    def _stop(self, exc: BaseException) -> None:
        """Below the minimum quorum for ``ft_quorum_timeout``: one line, and the run stops."""
        line = (
            f"accel-ft: replica group {self.group} found no quorum of {self.min_replicas} "
            f"replica groups within {self.quorum_timeout:g} s at step "
            f"{self.manager.current_step()}: stopping the run ({str(exc).splitlines()[0][:200]})"
        )
        if self.run_dir is not None:
            (self.run_dir / STOP_FILE).write_text(line + "\n")  # the supervisor prints it
        else:
            logger.error(line)
        sys.stderr.flush()
        os._exit(QUORUM_LOST_EXIT)

    def shutdown(self) -> None:
        """Leave the quorum (at interpreter exit)."""
        self.manager.shutdown(wait=False)


__all__ = ["DONE_FILE", "QUORUM_LOST_EXIT", "ReplicaSession", "STOP_FILE", "StepPlan"]
