"""``Accelerator.save_model`` of a dispatched model writes the real weights, offloaded ones included."""

from __future__ import annotations

import pytest
import torch
from accel import Accelerator
from accel.big_model.dispatch import cpu_offload, disk_offload, dispatch_model
from accel.utils.modeling import load_weights
from torch import nn


class Net(nn.Module):
    """Linear layers, a buffer-holding BatchNorm and a head tied to the first layer."""

    def __init__(self):
        super().__init__()
        self.first = nn.Linear(8, 8)
        self.norm = nn.BatchNorm1d(8)
        self.middle = nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 8))
        self.head = nn.Linear(8, 8)
        self.head.weight = self.first.weight

    def forward(self, x):
        return self.head(self.middle(self.norm(self.first(x))))


def _net() -> tuple[Net, dict[str, torch.Tensor]]:
    torch.manual_seed(0)
    net = Net()
    with torch.no_grad():
        net.norm.running_mean.uniform_()  # buffers with values that are not the defaults
        net.norm.running_var.uniform_(1.0, 2.0)
        net.norm.num_batches_tracked.fill_(7)
    return net.eval(), {k: v.clone() for k, v in net.state_dict().items()}


def _offload(kind: str, net: Net, folder) -> Net:
    if kind == "dispatch_disk":
        device_map = {"first": "cpu", "norm": "disk", "middle.0": "disk", "middle.1": "cpu"}
        device_map["head"] = "disk"
        return dispatch_model(net, device_map=device_map, offload_dir=str(folder))
    if kind == "disk_offload":
        return disk_offload(net, str(folder), execution_device="cpu")
    return cpu_offload(net, execution_device="cpu")


@pytest.mark.parametrize("kind", ["dispatch_disk", "disk_offload", "cpu_offload"])
def test_save_model_of_an_offloaded_model_writes_the_real_weights(kind, tmp_path):
    net, expected = _net()
    x = torch.randn(3, 8)
    reference = net(x)
    net = _offload(kind, net, tmp_path / "offload")
    assert any(p.device.type == "meta" for p in net.parameters())  # really offloaded
    Accelerator(cpu=True).save_model(net, tmp_path / "saved", max_shard_size="1KB")
    saved = load_weights(tmp_path / "saved")
    assert set(saved) == set(expected)  # buffers and the tied name included
    for key, value in saved.items():
        assert value.device.type == "cpu" and torch.equal(value, expected[key]), key
    assert torch.equal(saved["first.weight"], expected["head.weight"])
    # the model still works after the save (weights dropped back to their offload place)
    assert any(p.device.type == "meta" for p in net.parameters())
    torch.testing.assert_close(net(x), reference)

    fresh = Net().eval()
    fresh.load_state_dict(saved, strict=False)
    torch.testing.assert_close(fresh(x), reference)


def test_save_model_refuses_weights_left_on_the_meta_device(tmp_path):
    with torch.device("meta"):
        net = Net()
    with pytest.raises(RuntimeError, match="meta device"):
        Accelerator(cpu=True).save_model(net, tmp_path / "saved")
