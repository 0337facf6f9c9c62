"""Accelerate's ``examples/by_feature/cross_validation.py``, on local data: k folds, each a new
tiny BERT trained with ``Accelerator`` and evaluated with ``gather_for_metrics``, then the
folds' test logits averaged.

    python cross_validation.py --output cv.json                             # 1 process
    accelerate launch --multi_gpu --num_processes 2 cross_validation.py --output cv.json

The example's structure (one Accelerator, ``prepare`` per fold, a linear warm-up schedule,
``set_seed`` once, shuffling train loaders, a tokenizer's ``pad`` as collate function) on a
word-level tokenizer and a generated sentence-pair task instead of the Hub's bert-base-cased
and GLUE MRPC. Records every step's loss, each epoch's validation accuracy and the averaged
test predictions.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "integration-tests" / "hf_stack"))
import tiny  # noqa: E402
from _common import parse_args, run_cases  # noqa: E402

FOLDS = 3
EPOCHS = 2
SEED = 42


def _pairs(rows: int, seed: int):
    """Sentence pairs labelled 1 when they share their first word (a learnable task)."""
    from datasets import Dataset

    rng = random.Random(seed)
    first, second, labels = [], [], []
    for _ in range(rows):
        a = [f"w{rng.randrange(tiny.VOCAB - 4)}" for _ in range(rng.randrange(3, 7))]
        b = [f"w{rng.randrange(tiny.VOCAB - 4)}" for _ in range(rng.randrange(3, 7))]
        same = rng.random() < 0.5
        if same:
            b[0] = a[0]
        first.append(" ".join(a))
        second.append(" ".join(b))
        labels.append(int(b[0] == a[0]))
    return Dataset.from_dict({"sentence1": first, "sentence2": second, "label": labels})


def _cross_validation() -> dict[str, Any]:
    import torch
    from accelerate import Accelerator
    from accelerate.utils import set_seed
    from torch.utils.data import DataLoader
    from transformers import (
        BertConfig,
        BertForSequenceClassification,
        get_linear_schedule_with_warmup,
    )

    tokenizer = tiny.tokenizer()
    train, test = _pairs(60, seed=3), _pairs(20, seed=4)
    accelerator = Accelerator(cpu=True)
    set_seed(SEED)

    def tokenized(data):
        out = data.map(
            lambda ex: tokenizer(ex["sentence1"], ex["sentence2"], truncation=True),
            batched=True,
            remove_columns=["sentence1", "sentence2"],
        )
        return out.rename_column("label", "labels")

    def collate(examples):
        return tokenizer.pad(examples, padding="longest", return_tensors="pt")

    record: dict[str, Any] = {"losses": [], "accuracy": [], "test": []}
    test_logits = []
    for fold in range(FOLDS):
        valid_idx = list(range(fold, len(train), FOLDS))
        train_idx = [i for i in range(len(train)) if i % FOLDS != fold]
        train_loader = DataLoader(
            tokenized(train.select(train_idx)), shuffle=True, collate_fn=collate, batch_size=8
        )
        valid_loader = DataLoader(
            tokenized(train.select(valid_idx)), collate_fn=collate, batch_size=16
        )
        test_loader = DataLoader(tokenized(test), collate_fn=collate, batch_size=16)
        model = BertForSequenceClassification(
            BertConfig(
                vocab_size=tiny.VOCAB,
                hidden_size=32,
                num_hidden_layers=2,
                num_attention_heads=2,
                intermediate_size=64,
                max_position_embeddings=64,
                type_vocab_size=2,
            )
        ).to(accelerator.device)
        optimizer = torch.optim.AdamW(model.parameters(), lr=2e-3)
        scheduler = get_linear_schedule_with_warmup(optimizer, 2, len(train_loader) * EPOCHS)
        model, optimizer, train_loader, valid_loader, scheduler = accelerator.prepare(
            model, optimizer, train_loader, valid_loader, scheduler
        )
        for _ in range(EPOCHS):
            model.train()
            for batch in train_loader:
                loss = model(**batch).loss
                accelerator.backward(loss)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
                record["losses"].append(loss.item())
            model.eval()
            correct = total = 0
            for batch in valid_loader:
                with torch.no_grad():
                    predictions = model(**batch).logits.argmax(dim=-1)
                predictions, references = accelerator.gather_for_metrics(
                    (predictions, batch["labels"])
                )
                correct += int((predictions == references).sum())
                total += len(references)
            record["accuracy"].append([correct, total])
        logits = []
        for batch in accelerator.prepare(test_loader):
            with torch.no_grad():
                out = model(**batch).logits
            logits.append(accelerator.gather_for_metrics(out))
        test_logits.append(torch.cat(logits))
    averaged = torch.stack(test_logits).mean(0)
    record["test"] = averaged.argmax(dim=-1).tolist()
    record["test_logit_sum"] = float(averaged.double().sum())
    return record


def main() -> None:
    args = parse_args(__doc__.splitlines()[0])
    run_cases("cross_validation.py", {"cross_validation": _cross_validation}, args)


if __name__ == "__main__":
    main()
