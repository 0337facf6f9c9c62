"""A backend reads the run through its ``BackendContext`` and declares what it changes."""

from __future__ import annotations

import torch
from accel import Accelerator
from accel.backends import Backend, BackendContext
from accel.plugins import registry
from accel.precision import Precision


def test_the_backend_holds_the_context_not_the_accelerator():
    accelerator = Accelerator(cpu=True)
    backend = accelerator.backend
    assert backend.context is accelerator.backend_context
    assert isinstance(backend.context, BackendContext)
    assert not any(isinstance(v, Accelerator) for v in vars(backend).values())
    assert not hasattr(backend, "accelerator")


def test_the_context_reads_live_values():
    accelerator = Accelerator(cpu=True, gradient_accumulation_steps=2)
    context = accelerator.backend_context
    assert context.gradient_accumulation_steps == 2
    accelerator.gradient_accumulation_steps = 3
    assert context.gradient_accumulation_steps == 3
    accelerator.rng_types = ["torch"]
    assert context.rng_types == ["torch"]
    accelerator.step_scheduler_with_optimizer = False
    assert context.step_scheduler_with_optimizer is False
    accelerator.even_batches = False
    assert context.even_batches is False
    assert context.precision is accelerator.precision
    replacement = Precision("no", accelerator.device, {})
    accelerator.precision = replacement
    assert context.precision is replacement
    assert (context.device, context.num_processes, context.process_index) == (
        accelerator.device,
        accelerator.num_processes,
        accelerator.process_index,
    )
    assert context.is_main_process and context.mixed_precision == accelerator.mixed_precision


class DeclaringBackend(Backend):
    """Returns its own precision from setup and asks for 5 accumulation steps."""

    name = "declaring"
    made: Precision | None = None

    def setup(self) -> Precision:
        DeclaringBackend.made = Precision("no", self.context.device, self.context.handlers)
        return DeclaringBackend.made

    def gradient_accumulation_steps(self, requested: int) -> int:
        return 5 if requested == 1 else requested


def test_the_connector_applies_what_the_backend_declares(monkeypatch):
    monkeypatch.setattr(registry, "get_backend", lambda distributed_type: DeclaringBackend)
    accelerator = Accelerator(cpu=True)
    assert isinstance(accelerator.backend, DeclaringBackend)
    assert accelerator.precision is DeclaringBackend.made
    assert accelerator.backend_context.precision is DeclaringBackend.made
    assert accelerator.gradient_accumulation_steps == 5


def test_join_uneven_inputs_is_a_declared_no_op_and_even_batches_are_restored():
    accelerator = Accelerator(cpu=True)
    loader = accelerator.prepare(
        torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.randn(8, 2)), 4)
    )
    with accelerator.join_uneven_inputs([], even_batches=False):
        assert accelerator.even_batches  # no join on one process: nothing overridden
    context = accelerator.backend_context
    sampler = loader.batch_sampler
    with context.override_even_batches(False):
        assert not accelerator.even_batches
        if hasattr(sampler, "even_batches"):
            assert not sampler.even_batches and not sampler.empty_batches
    assert accelerator.even_batches
    if hasattr(sampler, "even_batches"):
        assert sampler.even_batches


def test_supports_async_save_is_declared():
    class OwnFiles(Backend):
        def save_model_state(self, *args, **kwargs) -> None:
            pass

    accelerator = Accelerator(cpu=True)
    assert accelerator.backend.supports_async_save is True
    assert OwnFiles(accelerator.backend_context).supports_async_save is False


def test_the_sequence_parallel_loader_adapter_is_declared_with_a_default():
    accelerator = Accelerator(cpu=True)
    loader = torch.utils.data.DataLoader(list(range(4)), batch_size=2)
    assert "deepspeed_ulysses_dl_adapter" in vars(Backend)
    assert accelerator.deepspeed_ulysses_dl_adapter(loader, None) is loader

    class Cutting(Backend):
        def deepspeed_ulysses_dl_adapter(self, dataloader, model=None):
            return ("cut", dataloader, model)

    accelerator.backend = Cutting(accelerator.backend_context)
    assert accelerator.deepspeed_ulysses_dl_adapter(loader, "m") == ("cut", loader, "m")


def test_everything_core_calls_on_a_backend_is_declared_on_backend():
    """No ``getattr(backend, "x", None)`` probing: each member core uses has a default on Backend."""
    import ast
    from pathlib import Path

    import accel

    src = Path(accel.__file__).parent
    callers = [
        src / "accelerator.py",
        src / "accelerator_checkpointing.py",
        src / "connector.py",
        *sorted((src / "checkpoint").glob("*.py")),
    ]
    used: dict[str, str] = {}
    for path in callers:
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and (
                (isinstance(node.value, ast.Attribute) and node.value.attr == "backend")
                or (isinstance(node.value, ast.Name) and node.value.id == "backend")
            ):
                used.setdefault(node.attr, f"{path.name}:{node.lineno}")
            if (
                isinstance(node, ast.Call)
                and getattr(node.func, "id", None) in ("getattr", "hasattr")
                and ast.unparse(node.args[0]).endswith("backend")
            ):
                raise AssertionError(
                    f"{path.name}:{node.lineno}: {ast.unparse(node)} probes the backend"
                )
    assert "wait_for_everyone" in used and "deepspeed_ulysses_dl_adapter" in used
    undeclared = {name: where for name, where in used.items() if not hasattr(Backend, name)}
    assert not undeclared, f"called on a backend but not declared on Backend: {undeclared}"
