"""accel-megatron checks on 2 real gloo processes; argv[2]: a scratch dir.

argv[1]: ``tp`` (tp=2, settings from `accel launch`) or ``dp`` (tp=1 with 2 data-parallel
ranks, then pp=2 in the same processes).

Prints ``ok <check>`` per passed check; any failure raises (non-zero exit).
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from accel import Accelerator
from accel.utils import MegatronLMDummyScheduler, MegatronLMPlugin


def report(message: str) -> None:
    """One ``ok <message>`` line, written at once (ranks share the pipe)."""
    sys.stdout.write(f"ok {message}\n")
    sys.stdout.flush()


def all_equal(tensor: torch.Tensor) -> bool:
    """Whether ``tensor`` is the same on every rank."""
    parts = [torch.empty_like(tensor) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, tensor.contiguous())
    return all(torch.equal(parts[0], p) for p in parts)


def mlp_class():
    """A two-layer tensor-parallel MLP (Column -> GELU -> Row) returning an MSE loss."""
    from megatron.core.tensor_parallel import ColumnParallelLinear, RowParallelLinear
    from megatron.core.transformer.module import MegatronModule

    class TPMLP(MegatronModule):
        def __init__(self, config):
            super().__init__(config)
            init = torch.nn.init.zeros_
            self.fc1 = ColumnParallelLinear(
                8, 16, config=config, init_method=init, bias=True, gather_output=False
            )
            self.fc2 = RowParallelLinear(
                16,
                8,
                config=config,
                init_method=init,
                bias=True,
                input_is_parallel=True,
                skip_bias_add=False,
            )

        def set_input_tensor(self, tensor):
            """One stage only: nothing comes from a previous stage."""

        def forward(self, x, y):
            if not self.config.sequence_parallel:
                hidden, _ = self.fc1(x)
                out, _ = self.fc2(F.gelu(hidden))
                return F.mse_loss(out, y)
            # sequence parallel: [batch, seq, h] -> this rank's part of the sequence, [seq/tp, batch, h]
            from megatron.core.tensor_parallel import (
                reduce_from_tensor_model_parallel_region,
                scatter_to_sequence_parallel_region,
            )

            x = scatter_to_sequence_parallel_region(x.transpose(0, 1).contiguous())
            y = scatter_to_sequence_parallel_region(y.transpose(0, 1).contiguous())
            hidden, _ = self.fc1(x)  # gathers the sequence
            out, _ = self.fc2(F.gelu(hidden))  # reduce-scatters it back
            local = (out - y).pow(2).sum() / (y.numel() * self.config.tensor_model_parallel_size)
            return reduce_from_tensor_model_parallel_region(local)

    return TPMLP


def check_mlp_parity(accelerator, plugin, tp_rank: int, tp: int) -> None:
    """The TP-split MLP trains exactly like the unsplit one: loss, gradients, clipped SGD step."""
    torch.manual_seed(0)
    reference = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 8))
    shape = (8, 4, 8) if plugin.sequence_parallelism else (8, 8)  # [batch, (seq,) hidden]
    x, y = torch.randn(shape), torch.randn(shape)
    config = plugin.transformer_config(num_layers=1, hidden_size=8, num_attention_heads=2)
    model = mlp_class()(config)
    rows = slice(tp_rank * 16 // tp, (tp_rank + 1) * 16 // tp)
    with torch.no_grad():
        model.fc1.weight.copy_(reference[0].weight[rows])
        model.fc1.bias.copy_(reference[0].bias[rows])
        model.fc2.weight.copy_(reference[2].weight[:, rows])
        model.fc2.bias.copy_(reference[2].bias)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    engine, opt = accelerator.prepare(model, optimizer)
    dp_rank, dp = accelerator.backend.data_parallel_rank, accelerator.backend.dp_degree
    share = slice(dp_rank * 8 // dp, (dp_rank + 1) * 8 // dp)
    out = engine(x=x[share], y=y[share])
    # the schedule cuts the batch into micro-batches: the loss is their mean
    ref_loss = torch.stack(
        [F.mse_loss(reference(a), b) for a, b in zip(x.chunk(2 * dp), y.chunk(2 * dp))]
    ).mean()
    ref_loss.backward()
    assert torch.allclose(out.loss, ref_loss, atol=1e-6), (out.loss, ref_loss)
    inner = accelerator.unwrap_model(engine)
    grads = {
        "fc1.weight": (inner.fc1.weight.main_grad, reference[0].weight.grad[rows]),
        "fc1.bias": (inner.fc1.bias.main_grad, reference[0].bias.grad[rows]),
        "fc2.weight": (inner.fc2.weight.main_grad, reference[2].weight.grad[:, rows]),
        "fc2.bias": (inner.fc2.bias.main_grad, reference[2].bias.grad),
    }
    for name, (got, want) in grads.items():
        assert torch.allclose(got, want, atol=1e-6), (name, (got - want).abs().max())
    report(f"mlp_forward_backward{' sequence_parallel' if plugin.sequence_parallelism else ''}")
    norm = torch.nn.utils.clip_grad_norm_(reference.parameters(), plugin.gradient_clipping)
    torch.optim.SGD(reference.parameters(), lr=0.5).step()
    opt.step()
    assert abs(opt.grad_norm - float(norm)) < 1e-5, (opt.grad_norm, float(norm))
    assert float(norm) > plugin.gradient_clipping  # clipping really happened
    assert torch.allclose(inner.fc1.weight, reference[0].weight[rows], atol=1e-6)
    assert torch.allclose(inner.fc2.weight, reference[2].weight[:, rows], atol=1e-6)
    assert torch.allclose(inner.fc2.bias, reference[2].bias, atol=1e-6)
    opt.zero_grad()
    assert float(inner.fc1.weight.main_grad.abs().sum()) == 0.0
    report(f"mlp_clipped_step{' sequence_parallel' if plugin.sequence_parallelism else ''}")


class Tokens(torch.utils.data.Dataset):
    """Sequences counting up from a random start, modulo the vocabulary: easy to learn."""

    def __init__(self, count: int, length: int = 8, vocab: int = 32):
        generator = torch.Generator().manual_seed(1)
        starts = torch.randint(0, vocab, (count, 1), generator=generator)
        self.data = (starts + torch.arange(length)) % vocab

    def __len__(self):
        return len(self.data)

    def __getitem__(self, index):
        return {"input_ids": self.data[index]}


def check_gpt_training(accelerator, plugin, scratch: Path) -> None:
    """A megatron-core GPT: whole prepare, train steps, scheduler, DP-averaged eval loss, save/load."""
    from accel_megatron import build_gpt_model

    torch.manual_seed(0)
    model = build_gpt_model(32, 8, num_layers=2, hidden_size=16, num_attention_heads=4)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
    scheduler = MegatronLMDummyScheduler(optimizer, num_training_steps=20, num_warmup_steps=2)
    train = torch.utils.data.DataLoader(Tokens(32), batch_size=2, shuffle=True)
    evaluation = torch.utils.data.DataLoader(Tokens(8), batch_size=2)
    model, optimizer, train, evaluation, scheduler = accelerator.prepare(
        model, optimizer, train, evaluation, scheduler
    )
    dp = accelerator.backend.dp_degree
    assert plugin.micro_batch_size == 2
    assert (
        accelerator.state.megatron_lm_plugin.global_batch_size == 2 * plugin.num_micro_batches * dp
    )
    assert len(train) == 32 // (2 * plugin.num_micro_batches * dp), len(train)
    report(f"global_batch_size {plugin.global_batch_size}")

    def evaluate() -> torch.Tensor:
        model.eval()
        losses = []
        with torch.no_grad():
            for batch in evaluation:
                losses.append(model(**batch).loss)
        model.train()
        return torch.tensor(losses).mean()

    before = evaluate()
    lrs = []
    for batch in train:
        # tensor-parallel peers get the same samples; data-parallel ranks different ones
        assert all_equal(batch["input_ids"]) == (dp == 1)
        out = model(**batch)
        accelerator.backward(out.loss)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        lrs.append(scheduler.get_last_lr()[0])
        assert all_equal(out.loss)
    assert abs(lrs[0] - 5e-3) < 1e-9 and abs(lrs[1] - 1e-2) < 1e-9 and lrs[-1] < lrs[1], lrs
    after = evaluate()
    assert all_equal(after) and after < before, (before, after)
    report(f"gpt_train eval_loss {before:.4f} -> {after:.4f}")

    accelerator.save_state(scratch / "ckpt")
    saved_lr = scheduler.get_last_lr()[0]
    for batch in train:
        model(**batch)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        break
    assert not torch.equal(evaluate(), after)
    accelerator.load_state(scratch / "ckpt")
    assert torch.allclose(evaluate(), after, atol=1e-6)
    assert scheduler.get_last_lr()[0] == saved_lr
    report("save_load")
    check_megatron_datasets(accelerator, model, scratch)


def check_megatron_datasets(accelerator, model, scratch: Path) -> None:
    """MegatronLMDummyDataLoader: megatron-core GPT datasets from indexed files, as loaders."""
    import numpy
    from accel.utils import MegatronLMDummyDataLoader
    from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder

    prefix = scratch / "corpus"
    if dist.get_rank() == 0:
        builder = IndexedDatasetBuilder(f"{prefix}.bin", dtype=numpy.int32)
        generator = torch.Generator().manual_seed(3)
        for _ in range(40):  # documents of counting tokens, ended by the eod token 0
            start = int(torch.randint(1, 31, (1,), generator=generator))
            document = torch.tensor([1 + (start + i) % 31 for i in range(12)] + [0])
            builder.add_document(document, [len(document)])
        builder.finalize(f"{prefix}.idx")
    dist.barrier()
    dummy = MegatronLMDummyDataLoader(
        data_path=str(prefix), seq_length=8, micro_batch_size=2, eod_token_id=0, vocab_size=32,
        num_samples=(16, 8, 0), splits_string="80,20,0", path_to_cache=str(scratch / "cache"),
    )  # fmt: skip
    train, valid, test = accelerator.prepare(dummy, dummy, dummy)
    assert test is None and len(train) >= 1 and len(valid) >= 1
    batch = next(iter(train))
    assert set(batch) >= {"tokens", "labels", "loss_mask", "position_ids"}
    assert batch["tokens"].shape[1] == 8
    assert all_equal(batch["tokens"]) == (accelerator.backend.dp_degree == 1)
    model.train()
    loss = model(**batch).loss
    model.eval()
    with torch.no_grad():
        valid_loss = model(**next(iter(valid))).loss
    assert torch.isfinite(loss) and all_equal(valid_loss)
    report("megatron_datasets")


def _gpt_loss(model, batch: torch.Tensor) -> torch.Tensor:
    """Mean over 2 micro-batches of the masked next-token loss, as the prepared model computes it."""
    from accel_megatron.engine import gpt_inputs

    losses = []
    for part in batch.chunk(2):
        inputs = gpt_inputs({"input_ids": part})
        mask = inputs.pop("loss_mask")
        losses.append((model(**inputs) * mask).sum() / mask.sum())
    return torch.stack(losses).mean()


def reference_gpt(scratch: Path) -> None:
    """With tp=pp=1: a fixed GPT's checkpoint, its loss on a fixed batch, and the loss after one SGD step."""
    from accel_megatron import build_gpt_model
    from accel_megatron.checkpoint import save_model
    from accel_megatron.cpu import cpu_execution

    torch.manual_seed(7)
    model = build_gpt_model(
        32, 8, num_layers=2, hidden_size=16, num_attention_heads=4,
        hidden_dropout=0.0, attention_dropout=0.0,
    )  # fmt: skip
    batch = Tokens(4).data
    with cpu_execution():
        save_model(model, scratch / "reference" / "model_0", on_cpu=True)
        with torch.no_grad():
            before = _gpt_loss(model, batch)
        _gpt_loss(model, batch).backward()
        with torch.no_grad():
            for param in model.parameters():
                param -= 0.5 * param.grad
            after = _gpt_loss(model, batch)
    if dist.get_rank() == 0:
        torch.save(torch.stack([before, after]), scratch / "reference_loss.pt")
    dist.barrier()


def check_gpt_tensor_parallel(scratch: Path) -> None:
    """tp=2 in the same processes: the unsplit GPT's checkpoint loads into 2 shards; the loss and
    the SGD step (so the gradients) equal the unsplit model's."""
    from accel.state import AcceleratorState
    from accel_megatron import build_gpt_model
    from megatron.core import parallel_state as ps

    ps.destroy_model_parallel()
    AcceleratorState._reset_state()
    plugin = MegatronLMPlugin(tp_degree=2, num_micro_batches=2, gradient_clipping=0.0)
    accelerator = Accelerator(megatron_lm_plugin=plugin)
    torch.manual_seed(100)
    model = build_gpt_model(
        32, 8, num_layers=2, hidden_size=16, num_attention_heads=4,
        hidden_dropout=0.0, attention_dropout=0.0,
    )  # fmt: skip
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    fixed = torch.utils.data.DataLoader(Tokens(4), batch_size=2)
    model, optimizer, fixed = accelerator.prepare(model, optimizer, fixed)
    accelerator.backend.load_model_state(model, scratch / "reference", 0)
    before, after = torch.load(scratch / "reference_loss.pt", weights_only=True)
    batch = next(iter(fixed))
    out = model(**batch)
    assert torch.allclose(out.loss, before, atol=1e-5), (out.loss, before)
    optimizer.step()
    optimizer.zero_grad()
    model.eval()
    with torch.no_grad():
        stepped = model(**batch).loss
    assert torch.allclose(stepped, after, atol=1e-5), (stepped, after)
    report("gpt_tensor_parallel_equals_unsplit")
    accelerator.free_memory()


def check_pipeline(scratch: Path) -> None:
    """pp=2 on the same 2 processes: the unsplit GPT's checkpoint loads into 2 stages, gives the same loss, trains."""
    from accel.state import AcceleratorState
    from accel_megatron import build_gpt_model
    from megatron.core import parallel_state as ps

    ps.destroy_model_parallel()
    AcceleratorState._reset_state()
    plugin = MegatronLMPlugin(pp_degree=2, num_micro_batches=2)
    accelerator = Accelerator(megatron_lm_plugin=plugin)
    got = (
        ps.get_tensor_model_parallel_world_size(),
        ps.get_pipeline_model_parallel_world_size(),
        ps.get_data_parallel_world_size(),
    )
    assert got == (1, 2, 1), got
    stage = ps.get_pipeline_model_parallel_rank()
    torch.manual_seed(stage + 100)  # other weights than the reference until it is loaded
    model = build_gpt_model(32, 8, num_layers=2, hidden_size=16, num_attention_heads=4)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scheduler = MegatronLMDummyScheduler(optimizer, total_num_steps=10)
    fixed = torch.utils.data.DataLoader(Tokens(4), batch_size=2)
    train = torch.utils.data.DataLoader(Tokens(16), batch_size=2, shuffle=True)
    model, optimizer, fixed, train, scheduler = accelerator.prepare(
        model, optimizer, fixed, train, scheduler
    )
    # the pp=1 checkpoint, resharded by megatron-core into this stage's layers
    accelerator.backend.load_model_state(model, scratch / "reference", 0)
    reference_loss = torch.load(scratch / "reference_loss.pt", weights_only=True)[0]
    batch = next(iter(fixed))
    model.eval()
    with torch.no_grad():
        before = model(**batch).loss
    assert torch.allclose(before, reference_loss, atol=1e-5), (before, reference_loss)
    report("pipeline_equals_unsplit")
    model.train()
    for step in train:
        out = model(**step)
        assert all_equal(out.loss)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
    model.eval()
    with torch.no_grad():
        after = model(**batch).loss
    assert all_equal(after) and after < before, (before, after)
    report(f"pipeline_train {float(before):.4f} -> {float(after):.4f}")


def check_sequence_parallel() -> None:
    """tp=2 with sequence parallelism in the same processes: the MLP still equals the unsplit one."""
    from accel.state import AcceleratorState
    from megatron.core import parallel_state as ps

    ps.destroy_model_parallel()
    AcceleratorState._reset_state()
    plugin = MegatronLMPlugin(
        tp_degree=2, sequence_parallelism=True, num_micro_batches=2, gradient_clipping=0.05
    )
    accelerator = Accelerator(megatron_lm_plugin=plugin)
    check_mlp_parity(accelerator, plugin, ps.get_tensor_model_parallel_rank(), 2)


def main() -> None:
    mode, scratch = sys.argv[1], Path(sys.argv[2])
    if mode == "tp":
        # settings come from the launch (megatron_lm_config of the YAML)
        accelerator = Accelerator()
        plugin = accelerator.state.megatron_lm_plugin
        assert (plugin.tp_degree, plugin.pp_degree, plugin.num_micro_batches) == (2, 1, 2), plugin
        assert plugin.recompute_activations and plugin.gradient_clipping == 0.5
        assert accelerator.distributed_type == "MEGATRON_LM"
        report("launched_plugin")
    else:
        plugin = MegatronLMPlugin(num_micro_batches=2, gradient_clipping=0.5)
        accelerator = Accelerator(megatron_lm_plugin=plugin)
    from megatron.core import parallel_state as ps

    tp = ps.get_tensor_model_parallel_world_size()
    expected = {"tp": (2, 1, 1), "dp": (1, 1, 2)}[mode]
    got = (tp, ps.get_pipeline_model_parallel_world_size(), ps.get_data_parallel_world_size())
    assert got == expected and accelerator.backend.dp_degree == expected[2], got
    report(f"groups {got}")
    check_mlp_parity(accelerator, plugin, ps.get_tensor_model_parallel_rank(), tp)
    accelerator.free_memory()
    check_gpt_training(accelerator, plugin, scratch)
    if mode == "dp":
        reference_gpt(scratch)
        accelerator.free_memory()
        check_pipeline(scratch)
        check_gpt_tensor_parallel(scratch)
        check_sequence_parallel()
    report(f"all {mode}")


if __name__ == "__main__":
    main()
