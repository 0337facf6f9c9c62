"""diffusers on accel: a ``UNet2DModel`` training loop as in its unconditional example (EMA,
save/load hooks that write ``save_pretrained`` folders, resume), and
``PartialState.split_between_processes`` inference on 2 processes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import accelerate  # noqa: E402, F401  (the workspace always has the compat distribution: never a skip)
import tiny  # noqa: E402

diffusers = pytest.importorskip("diffusers")

WORKERS = Path(__file__).parent / "workers"


def _train(accelerator, unet, ema, optimizer, loader, noise_scheduler, lr_scheduler, epochs):
    import torch
    import torch.nn.functional as F

    losses = []
    for _ in range(epochs):
        for images in loader:
            noise = torch.randn_like(images)
            steps = torch.randint(0, noise_scheduler.config.num_train_timesteps, (images.shape[0],))
            noisy = noise_scheduler.add_noise(images, noise, steps)
            with accelerator.accumulate(unet):
                loss = F.mse_loss(unet(noisy, steps).sample, noise)
                accelerator.backward(loss)
                if accelerator.sync_gradients:
                    accelerator.clip_grad_norm_(unet.parameters(), 1.0)
                optimizer.step()
                lr_scheduler.step()
                optimizer.zero_grad()
            if accelerator.sync_gradients:
                ema.step(unet.parameters())
            losses.append(loss.item())
    return losses


def _setup(tmp_path):
    import torch
    from accel import Accelerator
    from accel.utils import ProjectConfiguration, set_seed
    from diffusers import DDPMScheduler, UNet2DModel
    from diffusers.optimization import get_scheduler
    from diffusers.training_utils import EMAModel

    accelerator = Accelerator(
        cpu=True,
        gradient_accumulation_steps=2,
        project_config=ProjectConfiguration(
            project_dir=str(tmp_path), automatic_checkpoint_naming=False
        ),
    )
    set_seed(0)
    unet = tiny.unet2d()
    ema = EMAModel(unet.parameters(), model_cls=UNet2DModel, model_config=unet.config)

    def save_hook(models, weights, output_dir):
        ema.save_pretrained(Path(output_dir, "unet_ema"))
        for model in models:
            model.save_pretrained(Path(output_dir, "unet"))
            weights.pop()

    def load_hook(models, input_dir):
        loaded = EMAModel.from_pretrained(Path(input_dir, "unet_ema"), UNet2DModel)
        ema.load_state_dict(loaded.state_dict())
        for _ in range(len(models)):
            model = models.pop()
            reloaded = UNet2DModel.from_pretrained(input_dir, subfolder="unet")
            model.register_to_config(**reloaded.config)
            model.load_state_dict(reloaded.state_dict())

    accelerator.register_save_state_pre_hook(save_hook)
    accelerator.register_load_state_pre_hook(load_hook)
    images = torch.rand(32, 1, 8, 8, generator=torch.Generator().manual_seed(1)) * 2 - 1
    loader = torch.utils.data.DataLoader(images, batch_size=4, shuffle=True)
    optimizer = torch.optim.AdamW(unet.parameters(), lr=1e-3)
    lr_scheduler = get_scheduler(
        "cosine", optimizer=optimizer, num_warmup_steps=2, num_training_steps=32
    )
    unet, optimizer, loader, lr_scheduler = accelerator.prepare(
        unet, optimizer, loader, lr_scheduler
    )
    noise_scheduler = DDPMScheduler(num_train_timesteps=100)
    return accelerator, unet, ema, optimizer, loader, noise_scheduler, lr_scheduler


def test_unconditional_unet_training_loop_with_ema_and_resume(tmp_path):
    import torch
    from accel.utils import set_seed

    parts = _setup(tmp_path / "a")
    accelerator, unet, ema = parts[0], parts[1], parts[2]
    losses = _train(*parts, epochs=2)
    assert all(torch.isfinite(torch.tensor(losses)))
    accelerator.save_state(tmp_path / "ckpt")
    assert (tmp_path / "ckpt" / "unet" / "diffusion_pytorch_model.safetensors").is_file()
    assert (tmp_path / "ckpt" / "unet_ema" / "config.json").is_file()
    set_seed(5)
    expected = _train(*parts, epochs=1)
    weights = {k: v.clone() for k, v in accelerator.unwrap_model(unet).state_dict().items()}
    shadow = [p.clone() for p in ema.shadow_params]

    from accel.testing.fixtures import reset_accel_state

    reset_accel_state()
    resumed = _setup(tmp_path / "b")
    resumed[0].load_state(tmp_path / "ckpt")
    set_seed(5)
    assert _train(*resumed, epochs=1) == expected
    got = resumed[0].unwrap_model(resumed[1]).state_dict()
    assert all(torch.equal(got[k], v) for k, v in weights.items())
    assert all(torch.equal(a, b) for a, b in zip(resumed[2].shadow_params, shadow))


def test_split_between_processes_inference_on_two_processes(tmp_path):
    from accel.testing.processes import run_processes

    run_processes(WORKERS / "diffusers_split.py", [str(tmp_path)], nproc=2, timeout=300)
    outputs = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert outputs[0]["prompts"] == [0, 1, 2] and outputs[1]["prompts"] == [3, 4]
    gathered = outputs[0]["gathered"]
    assert outputs[1]["gathered"] == gathered
    assert gathered == outputs[0]["sums"] + outputs[1]["sums"]
