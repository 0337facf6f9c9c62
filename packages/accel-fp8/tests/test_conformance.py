"""accel-fp8 passes the precision conformance kit with torchao float8 on the CPU."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from accel.testing import PrecisionConformance

pytest.importorskip("torchao.float8", reason="the torchao backend needs torchao (accel-fp8[ao])")


class TestTorchaoFP8Conformance(PrecisionConformance):
    """``fp8`` with an ``AORecipeKwargs``: inner ``Linear`` layers become torchao ``Float8Linear``.

    The precision autocasts to bfloat16 around them (FP8 matmuls with bf16 activations), so
    every ``Linear`` outputs bfloat16; the first and last layers stay high precision.
    """

    precision_name = "fp8"
    compute_dtype = torch.bfloat16

    def handlers(self) -> dict[str, Any]:
        """The torchao recipe, as ``kwargs_handlers=[AORecipeKwargs()]`` passes it."""
        from accel_fp8 import AORecipeKwargs

        return {"AORecipeKwargs": AORecipeKwargs()}

    def assert_compute(self, model: torch.nn.Module, linear_dtypes: dict[str, torch.dtype]) -> None:
        """bfloat16 outputs, and the inner layers really are FP8 layers."""
        from torchao.float8.float8_linear import Float8Linear

        super().assert_compute(model, linear_dtypes)
        kinds = [type(m) for m in model.modules() if isinstance(m, torch.nn.Linear)]
        assert kinds[0] is torch.nn.Linear and kinds[-1] is torch.nn.Linear, kinds
        assert all(k is Float8Linear for k in kinds[1:-1]) and len(kinds) > 2, kinds
