"""Fixtures of accel-profiler's tests: a clean accel state, and the seed's ``models`` module."""

from __future__ import annotations

import types

import pytest
from accel.testing.fixtures import clean_accel_state  # noqa: F401


def _small_resnet18():
    """A small network with ResNet-18's operators and input/output shapes (when torchvision is absent)."""
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self, channels: int):
            super().__init__()
            self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
            self.bn1 = nn.BatchNorm2d(channels)
            self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
            self.bn2 = nn.BatchNorm2d(channels)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            out = torch.relu(self.bn1(self.conv1(x)))
            return torch.relu(self.bn2(self.conv2(out)) + x)

    return nn.Sequential(
        nn.Conv2d(3, 8, 7, stride=2, padding=3, bias=False),
        nn.BatchNorm2d(8),
        nn.ReLU(),
        nn.MaxPool2d(3, stride=2, padding=1),
        nn.AvgPool2d(4),
        Block(8),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(8, 1000),
    )


@pytest.fixture(scope="session")
def models():
    """``torchvision.models`` when installed, else a stand-in whose ``resnet18()`` is a small conv net."""
    try:
        import torchvision.models as tv_models
    except Exception:
        return types.SimpleNamespace(resnet18=_small_resnet18)
    return tv_models
