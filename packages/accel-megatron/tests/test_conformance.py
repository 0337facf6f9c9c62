"""accel-megatron passes the backend conformance kit with a plugin-provided model and training step.

A prepared Megatron-LM model is a megatron-core module whose call runs forward *and*
backward over its micro-batches (``model(batch)`` returns the loss; ``accelerator.backward``
does nothing), so this module gives the kit:

- ``make_model``: the kit's tiny MLP inside a ``MegatronModule`` with a ``TransformerConfig``
  (tensor/pipeline parallel 1, so two processes are two data-parallel ranks); called with a
  tensor it predicts (the plain-PyTorch reference), called with ``x=..., y=...`` it
  returns the MSE loss (what megatron-core's schedule calls);
- ``train_step``: ``model(x=x, y=y)``, ``optimizer.step()``, ``optimizer.zero_grad()``;
- ``plugin_kwargs``: a ``MegatronLMPlugin`` whose gradient clipping is out of reach, so plain
  SGD is the reference.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from accel.testing import BackendConformance
from accel.testing.reference import HIDDEN, IN_FEATURES

pytest.importorskip("megatron.core", reason="accel-megatron needs megatron-core")

HERE = Path(__file__).resolve()


def make_model(seed: int = 0) -> torch.nn.Module:
    """The kit's ``Linear -> Tanh -> Linear`` as a megatron-core module (same weights for a seed)."""
    from megatron.core.transformer import TransformerConfig
    from megatron.core.transformer.module import MegatronModule

    class ConformanceMLP(MegatronModule):
        def __init__(self, config: TransformerConfig):
            super().__init__(config)
            torch.manual_seed(seed)
            self.net = torch.nn.Sequential(
                torch.nn.Linear(IN_FEATURES, HIDDEN), torch.nn.Tanh(), torch.nn.Linear(HIDDEN, 1)
            )

        def set_input_tensor(self, tensor: Any) -> None:
            """One pipeline stage: nothing comes from a previous one."""

        def forward(self, x: torch.Tensor, y: torch.Tensor | None = None) -> torch.Tensor:
            prediction = self.net(x)
            return prediction if y is None else torch.nn.functional.mse_loss(prediction, y)

    config = TransformerConfig(
        num_layers=1, hidden_size=HIDDEN, num_attention_heads=1, use_cpu_initialization=True
    )
    return ConformanceMLP(config)


def train_step(accelerator: Any, model: Any, optimizer: Any, batch: Any) -> torch.Tensor:
    """The prepared model runs forward and backward (``model(**batch)``); the optimizer steps."""
    x, y = batch
    output = model(x=x, y=y)
    optimizer.step()
    optimizer.zero_grad()
    return output.loss


def plugin_kwargs() -> dict[str, Any]:
    """``megatron_lm_plugin`` with clipping far above any gradient norm here."""
    from accel.utils import MegatronLMPlugin

    return {"megatron_lm_plugin": MegatronLMPlugin(gradient_clipping=1.0e9)}


class TestMegatronBackendConformance(BackendConformance):
    """Two data-parallel megatron-core ranks (tp=1, pp=1) on gloo."""

    backend_name = "megatron_lm"
    world_sizes = (2,)
    model_factory = f"{HERE}:make_model"
    train_step = f"{HERE}:train_step"
    accelerator_kwargs_factory = f"{HERE}:plugin_kwargs"
    timeout = 300
