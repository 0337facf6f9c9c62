"""Small seeded models with tied weights, shared by the tests of several packages.

- :class:`TinyLM`: embedding, residual blocks, norm and a head tied to the embedding (like
  GPT-2); :func:`tiny_lm` gives one with deterministic, non-trivial weights.
- :class:`TiedNet`: linears, a BatchNorm with buffers and a head tied to the first linear;
  :func:`tied_net` gives one with non-default buffers and a copy of its state dict, and
  :func:`offload_tied_net` offloads it the three ways Accelerate offers.

Plain torch modules (the device-map reference generator builds them beside real Accelerate).
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn


class Block(nn.Module):
    """A residual block: two linears and a scalar buffer (a unit a device map keeps whole)."""

    def __init__(self, width: int):
        super().__init__()
        self.fc1 = nn.Linear(width, width)
        self.fc2 = nn.Linear(width, width)
        self.register_buffer("scale", torch.tensor(0.5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.fc2(torch.relu(self.fc1(x))) * self.scale


class TinyLM(nn.Module):
    """Embedding, :class:`Block` s, norm and a head tied to the embedding (like GPT-2)."""

    def __init__(self, width: int = 32, depth: int = 4, vocab: int = 40):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.blocks = nn.ModuleList(Block(width) for _ in range(depth))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def tiny_lm(seed: int = 0, width: int = 32, depth: int = 4, vocab: int = 40) -> TinyLM:
    """A :class:`TinyLM` in eval mode with deterministic weights, norms included (so a wrong load shows)."""
    torch.manual_seed(seed)
    model = TinyLM(width, depth, vocab)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return model.eval()


class TiedNet(nn.Module):
    """Linear layers, a BatchNorm with buffers, and a head tied to the first layer."""

    def __init__(self, width: int = 8):
        super().__init__()
        self.first = nn.Linear(width, width)
        self.norm = nn.BatchNorm1d(width)
        self.middle = nn.Sequential(nn.Linear(width, width), nn.Linear(width, width))
        self.head = nn.Linear(width, width)
        self.head.weight = self.first.weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.middle(self.norm(self.first(x))))


def tied_net(width: int = 8, seed: int = 0) -> tuple[TiedNet, dict[str, torch.Tensor]]:
    """A seeded :class:`TiedNet` in eval mode whose BatchNorm buffers are not the defaults,
    and a copy of its state dict."""
    torch.manual_seed(seed)
    net = TiedNet(width)
    buffers = dict(net.norm.named_buffers())
    with torch.no_grad():
        buffers["running_mean"].uniform_()
        buffers["running_var"].uniform_(1.0, 2.0)
        buffers["num_batches_tracked"].fill_(7)
    return net.eval(), {k: v.clone() for k, v in net.state_dict().items()}


OFFLOAD_KINDS = ("dispatch_disk", "disk_offload", "cpu_offload")
"""The ways :func:`offload_tied_net` offloads a model."""


def offload_tied_net(kind: str, net: TiedNet, folder: Path) -> nn.Module:
    """``net`` offloaded by ``kind``: a device map sending the norm, a middle layer and the
    tied head to disk (``dispatch_disk``), ``disk_offload`` or ``cpu_offload``."""
    from accel.big_model.dispatch import cpu_offload, disk_offload, dispatch_model

    if kind == "dispatch_disk":
        device_map = {"first": "cpu", "norm": "disk", "middle.0": "disk", "middle.1": "cpu"}
        device_map["head"] = "disk"
        return dispatch_model(net, device_map=device_map, offload_dir=str(folder))
    if kind == "disk_offload":
        return disk_offload(net, str(folder), execution_device="cpu")
    if kind == "cpu_offload":
        return cpu_offload(net, execution_device="cpu")
    raise ValueError(f"offload kind {kind!r}: use one of {', '.join(OFFLOAD_KINDS)}")
