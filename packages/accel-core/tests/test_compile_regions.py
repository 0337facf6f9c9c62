"""``compile_regions`` returns a compiled twin and leaves the model alone, as in Accelerate."""

from __future__ import annotations

import types

import pytest
import torch
from accel.utils import compile_regions, extract_model_from_parallel
from torch import nn
from torch._dynamo.eval_frame import OptimizedModule


class Blocks(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Linear(4, 4) for _ in range(2))
        self.head = nn.Linear(4, 2)
        self.tag = "original"

    def forward(self, x):
        self.seen = (self.tag, type(self.blocks[0]).__name__)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


@pytest.mark.timeout(120)
def test_compile_regions_returns_a_twin_and_leaves_the_model_alone():
    torch.manual_seed(0)
    model = Blocks()
    keys = list(model.state_dict())
    x = torch.randn(2, 4)
    expected = model(x)
    del model.seen

    compiled = compile_regions(model, backend="eager")
    assert compiled is not model
    assert compiled._orig_mod is model
    assert isinstance(compiled.blocks[0], OptimizedModule)
    assert compiled.blocks[0]._orig_mod is model.blocks[0]
    assert isinstance(compiled.head, OptimizedModule)
    assert compiled.head._orig_mod is model.head
    # the original is untouched
    assert list(model.state_dict()) == keys
    assert type(model.blocks[0]) is nn.Linear and model.blocks[0]._compiled_call_impl is None
    assert "_orig_mod" not in model.__dict__

    compiled.tag = "twin"
    torch.testing.assert_close(compiled(x), expected)
    assert compiled.seen == ("twin", "OptimizedModule")
    assert not hasattr(model, "seen") and model.tag == "original"
    assert extract_model_from_parallel(compiled, keep_torch_compile=False) is model


def test_compile_regions_binds_instance_methods_to_the_twin():
    model = Blocks()

    def forward(self, x):
        return type(self).forward(self, x)

    model.forward = types.MethodType(forward, model)
    compiled = compile_regions(model, backend="eager")
    assert compiled.__dict__["forward"].__self__ is compiled
    assert model.__dict__["forward"].__self__ is model


def test_compile_regions_without_blocks_is_torch_compile():
    model = nn.Linear(2, 2)
    compiled = compile_regions(model, backend="eager")
    assert isinstance(compiled, OptimizedModule) and compiled._orig_mod is model


def test_a_twin_has_compiled_regions_and_the_model_has_none():
    from accel.utils import has_compiled_regions

    model = Blocks()
    compiled = compile_regions(model, backend="eager")
    assert has_compiled_regions(compiled)
    assert not has_compiled_regions(model)
