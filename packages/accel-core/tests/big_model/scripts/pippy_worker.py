"""Worker of test_pippy: run under ``torch.distributed.run --nproc_per_node 2`` (gloo, CPU).

Every process builds the same model, computes the unsplit output, then runs it through
``prepare_pippy`` (automatic and explicit split points) and checks the pipeline's output.
"""

from __future__ import annotations

import sys

import torch
from accel import PartialState
from accel.inference import prepare_pippy
from torch import nn


class Block(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.fc1 = nn.Linear(width, 2 * width)
        self.fc2 = nn.Linear(2 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(torch.relu(self.fc1(x)))


class Net(nn.Module):
    _no_split_modules = ["Block"]

    def __init__(self, width: int = 16, depth: int = 4):
        super().__init__()
        self.inp = nn.Linear(8, width)
        self.blocks = nn.Sequential(*[Block(width) for _ in range(depth)])
        self.out = nn.Linear(width, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.blocks(self.inp(x)))


def build() -> Net:
    torch.manual_seed(0)
    return Net().eval()


def main() -> int:
    state = PartialState(cpu=True)
    assert state.num_processes == 2, state.num_processes
    torch.manual_seed(1)
    inputs = torch.randn(4, 8)
    with torch.no_grad():
        expected = build()(inputs)

    # Automatic split points from a balanced device map; output only on the last process.
    model = prepare_pippy(build(), example_args=(inputs,), num_chunks=2)
    assert model.pippy_split_points == ["blocks.2"], model.pippy_split_points
    with torch.no_grad():
        output = model(inputs)
    if state.is_last_process:
        assert torch.allclose(output, expected, atol=1e-6), (output - expected).abs().max()
    else:
        assert output is None, type(output)

    # Explicit split point, every process gets the output.
    model = prepare_pippy(
        build(), split_points=["blocks.1"], example_args=(inputs,), num_chunks=4, gather_output=True
    )
    with torch.no_grad():
        output = model(inputs)
    assert torch.allclose(output, expected, atol=1e-6), (output - expected).abs().max()
    state.wait_for_everyone()
    print(f"rank {state.process_index}: pippy ok", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
