"""Each rank denoises its share of 5 seeds with a tiny UNet2DModel + DDPM pipeline
(``PartialState.split_between_processes``); the sums are gathered and written per rank."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import tiny  # noqa: E402


def main(out: str) -> None:
    import torch
    from accel import PartialState
    from accel.utils import gather_object
    from diffusers import DDPMPipeline, DDPMScheduler

    state = PartialState()
    torch.manual_seed(0)  # the same weights on every rank
    unet = tiny.unet2d(attention=False)
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
