"""Worker: a megatron-core GPT saved under one layout resumes under another (2 gloo processes).

Arguments: OUT MODE TP. MODE ``save``: train 2 steps with tensor parallelism TP, save the whole
state, write the evaluation loss and the samples seen; ``resume``: load under TP (another
tensor / data-parallel split of the same 2 processes), check the evaluation loss is the saved
one, train the rest of the epoch and record the samples seen. Results go to OUT/<MODE>.json.
"""

import json
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from accel import Accelerator
from accel.distributed.operations import gather_object
from accel.utils import MegatronLMDummyScheduler, MegatronLMPlugin

out, mode, tp = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])


class Tokens(torch.utils.data.Dataset):
    """Indexed sequences counting up from a random start (the index is the first token's row)."""

    def __init__(self, count: int, length: int = 8, vocab: int = 32):
        generator = torch.Generator().manual_seed(1)
        starts = torch.randint(0, vocab, (count, 1), generator=generator)
        self.data = (starts + torch.arange(length)) % vocab

    def __len__(self):
        return len(self.data)

    def __getitem__(self, index):
        return {"input_ids": self.data[index], "index": torch.tensor(index)}


plugin = MegatronLMPlugin(tp_degree=tp, num_micro_batches=2, gradient_clipping=0.0)
accelerator = Accelerator(megatron_lm_plugin=plugin)
from accel_megatron import build_gpt_model  # noqa: E402

torch.manual_seed(0)
model = build_gpt_model(
    32, 8, num_layers=2, hidden_size=16, num_attention_heads=4,
    hidden_dropout=0.0, attention_dropout=0.0,
)  # fmt: skip
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
scheduler = MegatronLMDummyScheduler(optimizer, num_training_steps=20, num_warmup_steps=2)
train = torch.utils.data.DataLoader(Tokens(32), batch_size=2, shuffle=True)
evaluation = torch.utils.data.DataLoader(Tokens(8), batch_size=2)
model, optimizer, train, evaluation, scheduler = accelerator.prepare(
    model, optimizer, train, evaluation, scheduler
)


def evaluate() -> float:
    model.eval()
    with torch.no_grad():
        losses = [model(input_ids=b["input_ids"]).loss for b in evaluation]
    model.train()
    return float(torch.tensor(losses).mean())


if mode == "resume":
    accelerator.load_state(out / "ckpt")
    loaded = evaluate()
seen = []
for step, batch in enumerate(train):
    seen += batch["index"].tolist()
    loss = model(input_ids=batch["input_ids"]).loss
    accelerator.backward(loss)
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad()
    if mode == "save" and step == 1:
        accelerator.save_state(out / "ckpt")
        saved = evaluate()
        break
from megatron.core import parallel_state as ps  # noqa: E402

# every data-parallel rank's samples once (tensor-parallel peers read the same ones)
first_of_group = ps.get_tensor_model_parallel_rank() == 0
everyone = gather_object([seen if first_of_group else []])
record = {"seen": [i for part in everyone for i in part], "lr": scheduler.get_last_lr()[0]}
record["eval"] = saved if mode == "save" else loaded
if dist.get_rank() == 0:
    (out / f"{mode}.json").write_text(json.dumps(record))
accelerator.wait_for_everyone()
