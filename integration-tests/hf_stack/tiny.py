"""Tiny models, tokenizers and datasets for the Hugging Face stack tests, built locally (no Hub)."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

VOCAB = 64
SEQ = 16


def gpt2(seed: int = 0):
    """A 2-layer GPT-2 with 32-wide embeddings (dropout on, as in the real model), seeded."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    config = GPT2Config(
        vocab_size=VOCAB,
        n_positions=SEQ * 2,
        n_embd=32,
        n_layer=2,
        n_head=2,
        bos_token_id=3,
        eos_token_id=1,
        pad_token_id=0,
    )
    return GPT2LMHeadModel(config)


def lm_dataset(rows: int = 48, seed: int = 1):
    """``rows`` arithmetic token sequences (random start, step 1 or 2) with ``labels`` = ``input_ids``."""
    import torch
    from datasets import Dataset

    generator = torch.Generator().manual_seed(seed)
    start = torch.randint(0, VOCAB, (rows, 1), generator=generator)
    step = torch.randint(1, 3, (rows, 1), generator=generator)
    ids = (start + step * torch.arange(SEQ)) % VOCAB  # learnable: the next token follows
    return Dataset.from_dict({"input_ids": ids.tolist(), "labels": ids.tolist()})


def tokenizer():
    """A word-level tokenizer over ``w0`` ... ``w59`` plus pad/eos/unk (a PreTrainedTokenizerFast)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = ["<pad>", "<eos>", "<unk>", "<bos>"] + [f"w{i}" for i in range(VOCAB - 4)]
    backend = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token="<pad>",
        eos_token="<eos>",
        unk_token="<unk>",
        bos_token="<bos>",
    )


def text_dataset(rows: int = 32, seed: int = 2):
    """``rows`` sentences of 6-12 words of the tokenizer's vocabulary (a ``text`` column)."""
    import random

    from datasets import Dataset

    rng = random.Random(seed)
    texts = [
        " ".join(f"w{rng.randrange(VOCAB - 4)}" for _ in range(rng.randrange(6, 13)))
        for _ in range(rows)
    ]
    return Dataset.from_dict({"text": texts})


def unet2d(channels: int = 1, attention: bool = True):
    """A tiny diffusers ``UNet2DModel`` on 8x8 images (attention blocks unless ``attention=False``)."""
    from diffusers import UNet2DModel

    down = "AttnDownBlock2D" if attention else "DownBlock2D"
    up = "AttnUpBlock2D" if attention else "UpBlock2D"
    return UNet2DModel(
        sample_size=8,
        in_channels=channels,
        out_channels=channels,
        layers_per_block=1,
        block_out_channels=(8, 16),
        down_block_types=("DownBlock2D", down),
        up_block_types=(up, "UpBlock2D"),
        norm_num_groups=4,
    )


def training_args(output_dir: str, **overrides):
    """TrainingArguments for the tiny runs: CPU, no reporting, no progress bars, seed 42."""
    from transformers import TrainingArguments

    values = dict(
        output_dir=output_dir,
        per_device_train_batch_size=4,
        per_device_eval_batch_size=8,
        num_train_epochs=2,
        logging_steps=1,
        report_to=[],
        seed=42,
        use_cpu=True,
        disable_tqdm=True,
        save_strategy="no",
    )
    values.update(overrides)
    return TrainingArguments(**values)


def losses(trainer) -> list[tuple[float, float]]:
    """``(loss, grad_norm)`` of every logged training step."""
    return [(h["loss"], h["grad_norm"]) for h in trainer.state.log_history if "grad_norm" in h]
