"""Worker for test_distributed.py: torchao FP8 under FSDP2 on 2 gloo processes, started by
``accel launch --use_fsdp --mixed_precision fp8 --fp8_backend ao``; asserts, then prints ``ok``."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from accel import Accelerator


def main() -> None:
    """Train a small MLP in FP8 with FP8 all-gather; check layers, hook, sync and loss."""
    accelerator = Accelerator()  # mixed precision and fp8_config come from accel launch
    assert accelerator.mixed_precision == "fp8" and accelerator.distributed_type == "FSDP"
    assert accelerator.precision.fp8_backend == "AO"
    assert accelerator.precision.recipe.pad_inner_dim is False  # --fp8_pad_inner_dim false
    torch.manual_seed(0)
    layers = [torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 64)]
    model = torch.nn.Sequential(*layers, torch.nn.ReLU(), torch.nn.Linear(64, 8))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model, optimizer = accelerator.prepare(model, optimizer)
    inner = accelerator.unwrap_model(model)
    kinds = [type(inner[i]).__name__ for i in (0, 2, 4)]
    assert kinds == ["Linear", "Float8Linear", "Linear"], kinds
    assert inner[2].config.enable_fsdp_float8_all_gather is True  # the FSDP2 default
    assert type(inner[2].weight._local_tensor).__name__ == "WeightWithDynamicFloat8CastTensor"
    generator = torch.Generator().manual_seed(accelerator.process_index)
    x, y = torch.randn(32, 16, generator=generator), torch.randn(32, 8, generator=generator)
    losses = []
    for _ in range(8):
        loss = F.mse_loss(model(x), y)
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    assert all(b < a for a, b in zip(losses, losses[1:])) and losses[-1] < 0.9 * losses[0], losses
    full = inner[2].weight.detach().full_tensor().reshape(1, -1).contiguous()
    gathered = accelerator.gather(full)
    assert torch.equal(gathered[0], gathered[1])  # both ranks hold the same trained weights
    accelerator.print("ok fsdp2 fp8")


if __name__ == "__main__":
    main()
