"""The end-to-end check ``accel test`` runs under the configured launch.

Checks, on every process: the process state, collective operations, data
sharding, training parity with one process, and triggers. Prints one line per
check on the main process; exits 1 if any check failed on any process.
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable

from accel.config.options import Option

RESULTS: list[tuple[str, str, str]] = []

VERBOSE = Option(
    "test_verbose",
    bool,
    False,
    help="print the traceback of each failed check",
    env="ACCEL_TEST_VERBOSE",
    flag=None,
    in_file=False,
)
"""``ACCEL_TEST_VERBOSE``: a failed check prints its traceback."""


def check(name: str) -> Callable[[Callable[[], str | None]], None]:
    """Run the decorated function now; record PASS, SKIP (it returned a reason) or FAIL."""

    def run(fn: Callable[[], str | None]) -> None:
        try:
            skipped = fn()
        except Exception as exc:
            detail = f"{type(exc).__name__}: {exc}"
            if VERBOSE.from_env():
                detail += "\n" + traceback.format_exc()
            RESULTS.append((name, "FAIL", detail))
            return
        RESULTS.append((name, "SKIP", skipped) if skipped else (name, "PASS", ""))

    return run


def main() -> int:
    """Run every check; the exit status."""
    import torch
    from accel import PartialState
    from accel.distributed import operations as ops

    state = PartialState()
    rank, world = state.process_index, state.num_processes

    @check("state: ranks and world size")
    def _state() -> None:
        assert 0 <= rank < world, (rank, world)
        assert 0 <= state.local_process_index <= rank
        if world > 1:
            import torch.distributed as dist

            assert dist.is_initialized(), "process group not initialised"
            assert dist.get_world_size() == world and dist.get_rank() == rank
        from accel import catalog
        from accel.config.core_options import KEYS

        launched = KEYS["mixed_precision"].from_env(default=None)  # converting checks the name
        assert launched is None or launched in catalog.PRECISIONS, launched

    @check("operations: gather, reduce, broadcast, pad, gather_object")
    def _ops() -> None:
        t = torch.tensor([float(rank)], device=state.device)
        gathered = ops.gather(t).cpu().tolist()
        assert gathered == [float(r) for r in range(world)], gathered
        total = ops.reduce(torch.tensor([1.0], device=state.device), "sum").item()
        assert total == world, total
        b = torch.tensor([42.0 if rank == 0 else -1.0], device=state.device)
        assert ops.broadcast(b, 0).item() == 42.0
        padded = ops.pad_across_processes(torch.ones(rank + 1, device=state.device))
        assert padded.shape[0] == world, padded.shape
        objects = ops.gather_object([{"rank": rank}])
        assert [o["rank"] for o in objects] == list(range(world)), objects

    @check("data: split_between_processes covers every item once")
    def _split() -> None:
        items = list(range(2 * world + 1))
        with state.split_between_processes(items) as part:
            mine = list(part)
        everything = ops.gather_object(mine)
        assert sorted(everything) == items, everything

    @check("training: same weights as one process")
    def _train() -> str | None:
        from accel import Accelerator
        from accel.errors import MissingPluginError

        try:
            accelerator = Accelerator(cpu=state.device.type == "cpu")
        except MissingPluginError as exc:
            return str(exc)
        torch.manual_seed(0)
        x = torch.randn(8 * world, 3)
        y = x @ torch.tensor([[1.0], [-2.0], [0.5]]) + 0.1

        def make():
            torch.manual_seed(1)
            return torch.nn.Linear(3, 1)

        data = torch.utils.data.TensorDataset(x, y)
        loader = torch.utils.data.DataLoader(data, batch_size=4, shuffle=False)
        model = make()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        try:
            model, opt, loader = accelerator.prepare(model, opt, loader)
        except MissingPluginError as exc:
            return str(exc)
        for xb, yb in loader:
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(xb), yb)
            accelerator.backward(loss)
            opt.step()
        baseline = make()
        base_opt = torch.optim.SGD(baseline.parameters(), lr=0.1)
        # the prepared loader gives each process 4 samples per step: 4 * world per step in all
        for start in range(0, len(x), 4 * world):
            base_opt.zero_grad()
            xb, yb = x[start : start + 4 * world], y[start : start + 4 * world]
            torch.nn.functional.mse_loss(baseline(xb), yb).backward()
            base_opt.step()
        trained = accelerator.unwrap_model(model)
        for p, q in zip(trained.parameters(), baseline.parameters()):
            assert torch.allclose(p.detach().cpu(), q.detach(), atol=1e-5), (p, q)
        return None

    @check("triggers: set_trigger on the last process is seen by all")
    def _trigger() -> str | None:
        from accel import Accelerator
        from accel.errors import MissingPluginError

        try:
            accelerator = Accelerator(cpu=state.device.type == "cpu")
        except MissingPluginError as exc:
            return str(exc)
        assert not accelerator.check_trigger()
        if accelerator.is_last_process:
            accelerator.set_trigger()
        assert accelerator.check_trigger()
        assert not accelerator.check_trigger()
        return None

    all_results = ops.gather_object([(rank, RESULTS)]) if world > 1 else [(rank, RESULTS)]
    failed = False
    if state.is_main_process:
        print(
            f"accel test: {world} process(es), device {state.device}, "
            f"distributed_type {state.distributed_type}"
        )
        by_check: dict[str, list[tuple[int, str, str]]] = {}
        for r, results in all_results:
            for name, status, detail in results:
                by_check.setdefault(name, []).append((r, status, detail))
        for name, outcomes in by_check.items():
            bad = [o for o in outcomes if o[1] == "FAIL"]
            skipped = [o for o in outcomes if o[1] == "SKIP"]
            if bad:
                failed = True
                r, _, detail = bad[0]
                print(f"FAIL {name}: rank {r}: {detail}")
            elif skipped:
                print(f"SKIP {name}: {skipped[0][2]}")
            else:
                print(f"PASS {name}")
        print(
            "Test is a success! You are ready for your distributed training!"
            if not failed
            else "accel test: FAILED"
        )
    failed = any(status == "FAIL" for _, results in all_results for _, status, _ in results)
    sys.stdout.flush()
    state.wait_for_everyone()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
