"""``PrecisionConformance``: a precision computes in the dtype it claims, trains, and checkpoints its state."""

from __future__ import annotations

import io
from typing import ClassVar

import pytest
import torch

from accel.precision import Precision


def precision_model(seed: int = 0) -> torch.nn.Module:
    """Four 16-wide ``Linear`` layers (sizes FP8 kernels accept; first and last are often kept)."""
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(16, 32),
        torch.nn.ReLU(),
        torch.nn.Linear(32, 32),
        torch.nn.ReLU(),
        torch.nn.Linear(32, 32),
        torch.nn.ReLU(),
        torch.nn.Linear(32, 16),
    )


class PrecisionConformance:
    """Subclass in your plugin's tests (``Test...``) to check one ``mixed_precision`` value.

    The checks build the registered Precision class directly (``cls(name, device, handlers)``),
    the way the Accelerator does, and drive it through its public methods: ``prepare``,
    ``wrap_model``, ``autocast``, ``backward``, ``unscale_``, ``optimizer_step``,
    ``state_dict``/``load_state_dict``. No Accelerator and no process state is involved.
    """

    precision_name: ClassVar[str] = ""
    """The ``mixed_precision`` value (``"bf16"``, ``"fp8"``, ...)."""
    precision_class: ClassVar[type | None] = None
    """The class the registry must return for :attr:`precision_name` (None: any Precision)."""
    compute_dtype: ClassVar[torch.dtype] = torch.float32
    """dtype of the ``nn.Linear`` outputs inside the wrapped forward (what the precision claims)."""
    weight_dtype: ClassVar[torch.dtype] = torch.float32
    """dtype of the trainable parameters after ``prepare`` and ``wrap_model``."""
    output_dtype: ClassVar[torch.dtype | None] = torch.float32
    """dtype of the wrapped model's output (None: not checked)."""
    autocast_changes_dtype: ClassVar[bool] = True
    """Whether ``precision.autocast()`` alone makes a plain ``linear`` compute in :attr:`compute_dtype`."""
    device: ClassVar[str] = "cpu"
    """Device of the check."""
    steps: ClassVar[int] = 3
    """Optimizer steps of the training check."""

    def handlers(self) -> dict[str, object]:
        """Kwargs handlers by class name, as the Accelerator passes them (e.g. a recipe)."""
        return {}

    def make_model(self) -> torch.nn.Module:
        """The model to convert (default :func:`precision_model`)."""
        return precision_model()

    def make_inputs(self) -> tuple[torch.Tensor, torch.Tensor]:
        """One batch ``(x, y)`` for :meth:`make_model`."""
        generator = torch.Generator().manual_seed(0)
        x = torch.randn(16, 16, generator=generator)
        return x.to(self.device), torch.sin(x).to(self.device)

    def build(self) -> Precision:
        """A new instance of the registered precision."""
        from accel.plugins import registry

        cls = registry.get_precision(self.precision_name)
        return cls(self.precision_name, torch.device(self.device), self.handlers())

    def prepared(self) -> tuple[Precision, torch.nn.Module, torch.optim.Optimizer]:
        """A precision, and a model and optimizer passed through its ``prepare`` and ``wrap_model``."""
        precision = self.build()
        model = self.make_model().to(self.device)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
        objects = precision.prepare([model, optimizer])
        model, optimizer = objects[0], objects[1]
        model = precision.wrap_model(model)
        held = {id(p) for group in optimizer.param_groups for p in group["params"]}
        trainable = {id(p) for p in model.parameters() if p.requires_grad}
        assert held == trainable, "after prepare the optimizer does not hold the model's parameters"
        return precision, model, optimizer

    def assert_compute(self, model: torch.nn.Module, linear_dtypes: dict[str, torch.dtype]) -> None:
        """Check the dtypes the ``nn.Linear`` layers computed in; override to check more (layer kinds)."""
        wrong = {k: v for k, v in linear_dtypes.items() if v != self.compute_dtype}
        assert linear_dtypes, "the model has no nn.Linear layer"
        assert not wrong, f"layers did not compute in {self.compute_dtype}: {wrong}"

    # -- checks ---------------------------------------------------------------
    def test_precision_is_registered(self):
        """The registry resolves the name to a Precision subclass that lists it in ``names``."""
        from accel.plugins import registry

        assert self.precision_name, "set precision_name on the conformance class"
        cls = registry.get_precision(self.precision_name)
        assert isinstance(cls, type) and issubclass(cls, Precision), cls
        assert self.precision_name in cls.names, (self.precision_name, cls.names)
        if self.precision_class is not None:
            assert issubclass(cls, self.precision_class), (cls, self.precision_class)

    def test_forward_runs_in_the_claimed_dtype(self):
        """Inside the wrapped forward each ``Linear`` outputs :attr:`compute_dtype`; weights keep :attr:`weight_dtype`."""
        precision, model, _ = self.prepared()
        seen: dict[str, torch.dtype] = {}
        handles = [
            module.register_forward_hook(
                lambda m, args, out, name=name: seen.__setitem__(name, out.dtype)
            )
            for name, module in model.named_modules()
            if isinstance(module, torch.nn.Linear)
        ]
        x, _ = self.make_inputs()
        try:
            with torch.no_grad():
                out = model(x)
        finally:
            for handle in handles:
                handle.remove()
        self.assert_compute(model, seen)
        weights = {n: p.dtype for n, p in model.named_parameters() if p.requires_grad}
        assert weights and all(d == self.weight_dtype for d in weights.values()), weights
        if self.output_dtype is not None:
            assert out.dtype == self.output_dtype, (out.dtype, self.output_dtype)
        with precision.autocast():  # the context the Accelerator's autocast() enters
            direct = torch.nn.functional.linear(x, torch.ones(4, x.shape[1], device=x.device))
        expected = self.compute_dtype if self.compute_dtype != torch.float32 else x.dtype
        if self.autocast_changes_dtype:
            assert direct.dtype == expected, (direct.dtype, expected)

    def test_backward_and_step_train(self):
        """``backward`` gives finite gradients to every trainable parameter; ``optimizer_step`` updates them."""
        precision, model, optimizer = self.prepared()
        x, y = self.make_inputs()
        before = {n: p.detach().clone() for n, p in model.named_parameters()}
        stepped = 0
        losses = []
        for _ in range(self.steps):
            loss = torch.nn.functional.mse_loss(model(x).float(), y)
            assert torch.isfinite(loss), loss
            precision.backward(loss)
            for name, param in model.named_parameters():
                if param.requires_grad:
                    assert param.grad is not None, f"{name} got no gradient"
            precision.unscale_(optimizer)
            grads = [p.grad for p in model.parameters() if p.grad is not None]
            assert all(torch.isfinite(g).all() for g in grads), "non-finite unscaled gradients"
            result = precision.optimizer_step(optimizer)
            assert isinstance(result, bool), f"optimizer_step returned {result!r}, not a bool"
            stepped += int(result)
            optimizer.zero_grad()
            losses.append(float(loss.detach()))
        assert stepped >= 1, f"optimizer_step skipped all {self.steps} steps"
        changed = [n for n, p in model.named_parameters() if not torch.equal(before[n], p)]
        assert changed, "no parameter changed after the optimizer steps"
        assert losses[-1] < losses[0], f"the loss did not decrease: {losses}"

    def test_state_dict_round_trips(self):
        """``state_dict`` survives ``torch.save``/``torch.load(weights_only=True)`` and ``load_state_dict`` into a new instance."""
        precision, model, optimizer = self.prepared()
        x, y = self.make_inputs()
        precision.backward(torch.nn.functional.mse_loss(model(x).float(), y))
        precision.unscale_(optimizer)
        precision.optimizer_step(optimizer)
        state = precision.state_dict()
        other = self.build()
        if state is None:
            assert other.state_dict() is None, "state_dict is None on one instance only"
            pytest.skip(f"{type(precision).__name__} has no state to checkpoint")
        buffer = io.BytesIO()
        torch.save(state, buffer)
        buffer.seek(0)
        loaded = torch.load(buffer, weights_only=True)
        other.load_state_dict(loaded)
        assert _plain(other.state_dict()) == _plain(state), (other.state_dict(), state)


def _plain(value: object) -> object:
    if isinstance(value, torch.Tensor):
        return value.tolist()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value
