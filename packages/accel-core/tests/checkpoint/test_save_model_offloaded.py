"""``Accelerator.save_model`` of a dispatched model writes the real weights, offloaded ones included."""

from __future__ import annotations

import pytest
import torch
from accel import Accelerator
from accel.testing.models import OFFLOAD_KINDS, TiedNet, offload_tied_net, tied_net
from accel.utils.modeling import load_weights


@pytest.mark.parametrize("kind", OFFLOAD_KINDS)
def test_save_model_of_an_offloaded_model_writes_the_real_weights(kind, tmp_path):
    net, expected = tied_net()
    x = torch.randn(3, 8)
    reference = net(x)
    net = offload_tied_net(kind, net, tmp_path / "offload")
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

    fresh = TiedNet().eval()
    fresh.load_state_dict(saved, strict=False)
    torch.testing.assert_close(fresh(x), reference)


def test_save_model_refuses_weights_left_on_the_meta_device(tmp_path):
    with torch.device("meta"):
        net = TiedNet()
    with pytest.raises(RuntimeError, match="meta device"):
        Accelerator(cpu=True).save_model(net, tmp_path / "saved")
