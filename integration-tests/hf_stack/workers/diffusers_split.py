"""Each rank denoises its share of 5 seeds with a tiny UNet2DModel + DDPM pipeline
(``PartialState.split_between_processes``); the sums are gathered and written per rank."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(out: str) -> None:
    import torch
    from accel import PartialState
    from accel.utils import gather_object
    from diffusers import DDPMPipeline, DDPMScheduler, UNet2DModel

    state = PartialState()
    torch.manual_seed(0)  # the same weights on every rank
    unet = UNet2DModel(
        sample_size=8,
        in_channels=1,
        out_channels=1,
        layers_per_block=1,
        block_out_channels=(8, 16),
        down_block_types=("DownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "UpBlock2D"),
        norm_num_groups=4,
    )
    pipeline = DDPMPipeline(unet=unet, scheduler=DDPMScheduler(num_train_timesteps=10)).to(
        state.device
    )
    pipeline.set_progress_bar_config(disable=True)
    sums = []
    with state.split_between_processes(list(range(5))) as seeds:
        for seed in seeds:
            image = pipeline(
                batch_size=1,
                num_inference_steps=10,
                generator=torch.Generator().manual_seed(seed),
                output_type="np",
            ).images
            sums.append(round(float(image.sum()), 4))
    gathered = gather_object(sums)
    Path(out, f"rank{state.process_index}.json").write_text(
        json.dumps({"prompts": list(seeds), "sums": sums, "gathered": gathered})
    )


if __name__ == "__main__":
    main(sys.argv[1])
