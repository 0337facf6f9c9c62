"""One-shot check of every CUDA path of accel, on one (or two) CUDA GPUs, in under 8 minutes.

Each check runs in its own Python process with a time limit (launched checks go through
``accel launch``), and prints one line::

    PASS|FAIL|SKIP <name> <seconds> <reason>

then a step-time comparison of a small GPT trained in bf16: plain PyTorch, accel and
Accelerate (when it is installed: ``tools/bench/accelerate_env.py tools/gpu_check.py``), as ratios to plain PyTorch.

    uv run python tools/bench/accelerate_env.py tools/gpu_check.py   # on a CUDA machine
    uv run python tools/gpu_check.py --only fp16_grad_scaler,bnb_4bit
    uv run python tools/gpu_check.py --list
    uv run python tools/gpu_check.py --dry-run                # on a CPU: CI keeps it from rotting

``--dry-run`` runs, on the CPU and in this one process, everything but the CUDA calls of every
check: the imports, the plugin and kwargs objects, the models, the checkpoints they load, and
``accel launch --dry_run`` of the launched ones. It exits 1 if any of that fails.

Adding a check: write ``def check_<name>(ctx: Context) -> str`` that builds what it needs,
calls ``ctx.ready()`` before its first CUDA call (in a dry run that ends the check there),
asserts, and returns a short note; then append ``Check("<name>", check_<name>)`` to ``CHECKS``.
A check raises :class:`Skip` when the machine cannot run it (too few GPUs, a package missing).
Launched checks (several processes) put their per-process body in ``WORKERS`` and call
``ctx.launch(...)``.
"""

from __future__ import annotations

import argparse
import copy
import importlib.metadata
import importlib.util
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SCRIPT = Path(__file__).resolve()
TOTAL_BUDGET_S = 470.0
"""Wall-clock budget of a full run (the checks plus the step-time comparison): under 8 minutes."""


class Skip(Exception):
    """The machine cannot run this check (its reason is printed on the SKIP line)."""


class DryRunDone(Exception):
    """Raised by :meth:`Context.ready` in a dry run: everything before the CUDA calls worked."""


@dataclass
class Context:
    """What a check gets: whether this is a dry run, a scratch folder, and launch helpers."""

    dry_run: bool
    tmp: Path
    notes: list[str] = field(default_factory=list)

    def ready(self) -> None:
        """Mark the first CUDA call: in a dry run the check ends here, successfully."""
        if self.dry_run:
            raise DryRunDone
        import torch

        if not torch.cuda.is_available():
            raise Skip("no CUDA device")

    def gpus(self) -> int:
        """How many CUDA devices this process sees (0 in a dry run)."""
        if self.dry_run:
            return 0
        import torch

        return torch.cuda.device_count()

    def launch(self, worker: str, flags: list[str], timeout: float, expect: str) -> str:
        """Run ``accel launch <flags> gpu_check.py --worker <worker>`` and check its output.

        In a dry run: ``accel launch --dry_run`` of the same command, plus the worker's own
        building steps in this process (it stops at its ``ctx.ready()``).
        """
        command = [sys.executable, "-m", "accel_cli", "launch", *flags]
        if self.dry_run:
            command.insert(4, "--dry_run")
        command += [str(SCRIPT), "--worker", worker, "--tmp", str(self.tmp)]
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
        output = done.stdout + done.stderr
        if done.returncode != 0:
            raise AssertionError(f"accel launch exited {done.returncode}:\n{output[-3000:]}")
        if self.dry_run:
            if "command:" not in output:
                raise AssertionError(f"accel launch --dry_run printed no plan:\n{output[-2000:]}")
            WORKERS[worker](self)  # builds, then raises DryRunDone at ctx.ready()
            raise AssertionError(f"worker {worker} never called ctx.ready()")
        if expect not in done.stdout:
            raise AssertionError(f"no {expect!r} in the output:\n{output[-3000:]}")
        return [line for line in done.stdout.splitlines() if expect in line][-1].strip()


@dataclass
class Check:
    """A named check: ``function(ctx)`` returns a note, raises :class:`Skip`, or fails."""

    name: str
    function: Callable[[Context], str]
    timeout: float = 90.0


# --------------------------------------------------------------------------- shared pieces
def gpt(width: int = 256, blocks: int = 4, heads: int = 4, vocab: int = 512, context: int = 128):
    """A small GPT (pre-norm blocks, causal attention, untied head); ``_no_split_modules`` set."""
    import torch
    from torch import nn
    from torch.nn import functional as F

    class Attention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c_attn = nn.Linear(width, 3 * width)
            self.c_proj = nn.Linear(width, width)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b, t, c = x.shape
            q, k, v = self.c_attn(x).split(c, dim=2)
            q, k, v = (z.view(b, t, heads, c // heads).transpose(1, 2) for z in (q, k, v))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.c_proj(y.transpose(1, 2).reshape(b, t, c))

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ln_1 = nn.LayerNorm(width)
            self.attn = Attention()
            self.ln_2 = nn.LayerNorm(width)
            self.c_fc = nn.Linear(width, 4 * width)
            self.c_mlp = nn.Linear(4 * width, width)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = x + self.attn(self.ln_1(x))
            return x + self.c_mlp(F.gelu(self.c_fc(self.ln_2(x))))

    class GPT(nn.Module):
        _no_split_modules = ["Block"]

        def __init__(self) -> None:
            super().__init__()
            self.wte = nn.Embedding(vocab, width)
            self.wpe = nn.Embedding(context, width)
            self.blocks = nn.ModuleList(Block() for _ in range(blocks))
            self.ln_f = nn.LayerNorm(width)
            self.lm_head = nn.Linear(width, vocab, bias=False)

        def forward(self, idx: torch.Tensor) -> torch.Tensor:
            pos = torch.arange(idx.shape[1], device=idx.device)
            x = self.wte(idx) + self.wpe(pos)
            for block in self.blocks:
                x = block(x)
            return self.lm_head(self.ln_f(x))

    torch.manual_seed(0)
    return GPT()


def tokens(batch: int = 8, length: int = 64, vocab: int = 512, seed: int = 0):
    """Random token ids ``(batch, length + 1)``: inputs are ``[:, :-1]``, targets ``[:, 1:]``."""
    import torch

    return torch.randint(
        0, vocab, (batch, length + 1), generator=torch.Generator().manual_seed(seed)
    )


def lm_loss(model, batch):
    """Next-token cross entropy of ``model`` on a ``tokens()`` batch (computed in fp32)."""
    from torch.nn import functional as F

    logits = model(batch[:, :-1])
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1))


def token_loader(batches: int = 8, batch: int = 4, length: int = 64, vocab: int = 512):
    """A DataLoader of ``batches`` batches of token rows (for prepare: DeepSpeed needs one)."""
    from torch.utils.data import DataLoader, TensorDataset

    rows = tokens(batches * batch, length, vocab, seed=1)
    return DataLoader(TensorDataset(rows), batch_size=batch)


def train(accelerator, model, optimizer, batch, steps: int, scheduler=None) -> list[float]:
    """``steps`` steps on one fixed batch (the loss must fall); returns the losses."""
    losses = []
    for _ in range(steps):
        loss = lm_loss(model, batch)
        accelerator.backward(loss)
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        optimizer.zero_grad()
        losses.append(float(loss.detach()))
    return losses


def falls(losses: list[float]) -> None:
    """Assert the losses are finite and the last is below the first."""
    import math

    assert all(math.isfinite(x) for x in losses), f"non-finite loss: {losses}"
    assert losses[-1] < losses[0], f"the loss did not fall: {losses}"


def capture_dtype(module) -> dict[str, Any]:
    """A forward hook on ``module`` recording its output dtype in the returned dict."""
    seen: dict[str, Any] = {}
    module.register_forward_hook(lambda _m, _i, out: seen.__setitem__("dtype", out.dtype))
    return seen


def save_checkpoint(model, folder: Path) -> Path:
    """``model``'s state dict as one safetensors file in ``folder``."""
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "model.safetensors"
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(path))
    return path


def relative_error(ours, reference) -> float:
    """Frobenius norm of the difference over that of the reference."""
    ours, reference = ours.float().cpu(), reference.float().cpu()
    return float((ours - reference).norm() / reference.norm())


# --------------------------------------------------------------------------- checks
def check_bf16_train(ctx: Context) -> str:
    """bf16 autocast on CUDA: matmuls run in bf16, master weights stay fp32, the loss falls."""
    import torch
    from accel import Accelerator

    model = gpt()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    seen = capture_dtype(model.blocks[0].c_fc)
    batch = tokens()
    ctx.ready()
    accelerator = Accelerator(mixed_precision="bf16")
    assert accelerator.device.type == "cuda", accelerator.device
    model, optimizer = accelerator.prepare(model, optimizer)
    batch = batch.to(accelerator.device)
    losses = train(accelerator, model, optimizer, batch, 20)
    falls(losses)
    assert seen["dtype"] == torch.bfloat16, seen
    weight = accelerator.unwrap_model(model).blocks[0].c_fc.weight
    assert weight.dtype == torch.float32 and weight.is_cuda, (weight.dtype, weight.device)
    return f"loss {losses[0]:.2f} -> {losses[-1]:.2f}"


def check_fp16_grad_scaler(ctx: Context) -> str:
    """fp16 with GradScaler: a forced overflow skips the step (weights, scheduler untouched,
    scale halved), the next step goes through."""
    import torch
    from accel import Accelerator, GradScalerKwargs

    handlers = [GradScalerKwargs(init_scale=1024.0, growth_interval=100000)]
    model = gpt()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 / (1 + step))
    seen = capture_dtype(model.blocks[0].c_fc)
    batch = tokens()
    ctx.ready()
    accelerator = Accelerator(mixed_precision="fp16", kwargs_handlers=handlers)
    model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
    batch = batch.to(accelerator.device)
    scaler = accelerator.scaler
    assert scaler is not None and scaler.get_scale() == 1024.0, scaler
    losses = train(accelerator, model, optimizer, batch, 5, scheduler)
    assert not accelerator.optimizer_step_was_skipped
    assert seen["dtype"] == torch.float16, seen
    inner = scheduler.scheduler if hasattr(scheduler, "scheduler") else scheduler
    epoch = inner.last_epoch
    before = [p.detach().clone() for p in model.parameters()]

    loss = lm_loss(model, batch) * float("inf")  # every gradient becomes inf or nan
    accelerator.backward(loss)
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad()
    assert accelerator.optimizer_step_was_skipped, "the overflowing step was not skipped"
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters())), (
        "the weights changed on a skipped step"
    )
    assert inner.last_epoch == epoch, (
        f"the scheduler stepped on a skipped step ({epoch} -> {inner.last_epoch})"
    )
    assert scaler.get_scale() == 512.0, f"scale after overflow {scaler.get_scale()}, expected 512"

    losses += train(accelerator, model, optimizer, batch, 5, scheduler)
    assert not accelerator.optimizer_step_was_skipped, "a finite step was skipped"
    assert inner.last_epoch == epoch + 5
    assert not all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
    falls(losses)
    return f"overflow skipped, scale 1024 -> 512; loss {losses[0]:.2f} -> {losses[-1]:.2f}"


def worker_ddp(ctx: Context) -> None:
    """Per-process body of the DDP checks (launched by ``accel launch``)."""
    import torch
    import torch.distributed as dist
    from accel import Accelerator

    model = gpt()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    loader = token_loader(batches=8)
    ctx.ready()
    accelerator = Accelerator(mixed_precision="bf16", gradient_accumulation_steps=2)
    assert str(accelerator.distributed_type).endswith("MULTI_GPU"), accelerator.distributed_type
    assert dist.is_initialized() and dist.get_backend() == "nccl", dist.get_backend()
    assert accelerator.device == torch.device("cuda", accelerator.local_process_index)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    assert isinstance(model, torch.nn.parallel.DistributedDataParallel), type(model)
    losses = []
    for _ in range(3):
        for (batch,) in loader:
            with accelerator.accumulate(model):
                loss = lm_loss(model, batch)
                accelerator.backward(loss)
                optimizer.step()
                optimizer.zero_grad()
            losses.append(float(accelerator.reduce(loss.detach(), "mean")))
    falls(losses)
    world = accelerator.num_processes
    ranks = accelerator.gather(torch.tensor([accelerator.process_index], device=accelerator.device))
    assert ranks.tolist() == list(range(world)), ranks
    checksum = torch.stack([p.detach().double().sum() for p in model.parameters()]).sum()
    sums = accelerator.gather(checksum.reshape(1))
    assert torch.allclose(sums, sums[0].expand_as(sums)), f"weights differ across ranks: {sums}"
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        print(f"ok ddp world={world} backend=nccl loss {losses[0]:.2f} -> {losses[-1]:.2f}")
    accelerator.end_training()


def check_ddp_nccl_1proc(ctx: Context) -> str:
    """The DDP backend with nccl, one process, through ``accel launch --multi_gpu``."""
    flags = ["--multi_gpu", "--num_processes", "1", "--launcher", "torchrun"]
    return ctx.launch("ddp", flags, timeout=150, expect="ok ddp")


def check_ddp_nccl_2proc(ctx: Context) -> str:
    """The DDP backend with nccl on two GPUs (skipped with fewer)."""
    if not ctx.dry_run and ctx.gpus() < 2:
        raise Skip(f"{ctx.gpus()} GPU(s)")
    return ctx.launch("ddp", ["--multi_gpu", "--num_processes", "2"], timeout=150, expect="ok ddp")


def worker_fsdp2_offload(ctx: Context) -> None:
    """Per-process body of the FSDP2 + CPU offload check."""
    import torch
    from accel import Accelerator, FullyShardedDataParallelPlugin
    from torch.distributed.tensor import DTensor

    plugin = FullyShardedDataParallelPlugin(
        fsdp_version=2,
        cpu_offload=True,
        state_dict_type="SHARDED_STATE_DICT",
        auto_wrap_policy="transformer_based_wrap",
        transformer_cls_names_to_wrap=["Block"],
    )
    model = gpt()
    batch = tokens()
    ctx.ready()
    accelerator = Accelerator(mixed_precision="bf16", fsdp_plugin=plugin)
    assert "FSDP" in str(accelerator.distributed_type), accelerator.distributed_type
    model = accelerator.prepare(model)
    optimizer = accelerator.prepare(torch.optim.AdamW(model.parameters(), lr=3e-3))
    params = list(model.parameters())
    assert all(isinstance(p, DTensor) for p in params), "parameters are not DTensors"
    assert all(p.to_local().device.type == "cpu" for p in params), "parameters not offloaded"
    batch = batch.to(accelerator.device)
    losses = train(accelerator, model, optimizer, batch, 8)
    falls(losses)
    folder = ctx.tmp / "fsdp2-ckpt"
    accelerator.save_state(str(folder))
    with torch.no_grad():
        expected = float(lm_loss(model, batch))
        for p in model.parameters():
            p.to_local().zero_()
    accelerator.load_state(str(folder))
    with torch.no_grad():
        reloaded = float(lm_loss(model, batch))
    assert abs(reloaded - expected) < 1e-3, f"loss after load_state {reloaded} != {expected}"
    if accelerator.is_main_process:
        print(f"ok fsdp2 offload loss {losses[0]:.2f} -> {losses[-1]:.2f}, sharded save/load")
    accelerator.end_training()


def check_fsdp2_cpu_offload(ctx: Context) -> str:
    """FSDP2 (fully_shard) on one GPU with parameters offloaded to the CPU, sharded checkpoint."""
    return ctx.launch(
        "fsdp2_offload",
        ["--num_processes", "1", "--launcher", "torchrun"],
        timeout=180,
        expect="ok fsdp2",
    )


def _deepspeed(ctx: Context, stage: int) -> str:
    import torch
    from accel import Accelerator, DeepSpeedPlugin

    importlib.import_module("deepspeed")
    plugin = DeepSpeedPlugin(zero_stage=stage, gradient_accumulation_steps=1, gradient_clipping=1.0)
    model = gpt()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    loader = token_loader()
    batch = tokens(batch=4)
    ctx.ready()
    accelerator = Accelerator(mixed_precision="bf16", deepspeed_plugin=plugin)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    assert type(model).__name__ == "DeepSpeedEngine", type(model)
    batch = batch.to(accelerator.device)
    losses = train(accelerator, model, optimizer, batch, 8)
    falls(losses)
    if stage == 3:
        partitioned = [p for p in model.parameters() if hasattr(p, "ds_id")]
        assert partitioned, "ZeRO-3 did not partition the parameters"
    folder = ctx.tmp / f"zero{stage}-ckpt"
    with torch.no_grad():
        expected = float(lm_loss(model, batch))
    accelerator.save_state(str(folder))
    train(accelerator, model, optimizer, batch, 2)  # move away from the saved state
    accelerator.load_state(str(folder))
    with torch.no_grad():
        reloaded = float(lm_loss(model, batch))
    assert abs(reloaded - expected) < 1e-2, f"loss after load_state {reloaded} != {expected}"
    return f"loss {losses[0]:.2f} -> {losses[-1]:.2f}, save/load_state round trip"


def check_deepspeed_zero2(ctx: Context) -> str:
    """DeepSpeed ZeRO-2, bf16, one GPU, no launcher; save_state / load_state."""
    return _deepspeed(ctx, 2)


def check_deepspeed_zero3(ctx: Context) -> str:
    """DeepSpeed ZeRO-3 (parameters partitioned), bf16, one GPU; save_state / load_state."""
    return _deepspeed(ctx, 3)


def check_fp8_torchao(ctx: Context) -> str:
    """torchao float8 training on CUDA (compute capability 8.9 or newer)."""
    import torch
    from accel import Accelerator, AORecipeKwargs

    importlib.import_module("torchao.float8")
    model = gpt(width=256)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    batch = tokens(batch=16)
    ctx.ready()
    if torch.cuda.get_device_capability() < (8, 9):
        raise Skip(f"compute capability {torch.cuda.get_device_capability()} < 8.9")
    accelerator = Accelerator(mixed_precision="fp8", kwargs_handlers=[AORecipeKwargs()])
    model, optimizer = accelerator.prepare(model, optimizer)
    kinds = {type(m).__name__ for m in accelerator.unwrap_model(model).modules()}
    assert "Float8Linear" in kinds, kinds
    losses = train(accelerator, model, optimizer, batch.to(accelerator.device), 15)
    falls(losses)
    count = sum(
        type(m).__name__ == "Float8Linear" for m in accelerator.unwrap_model(model).modules()
    )
    return f"{count} Float8Linear layers; loss {losses[0]:.2f} -> {losses[-1]:.2f}"


def check_fp8_transformer_engine(ctx: Context) -> str:
    """TransformerEngine FP8 (DelayedScaling) on CUDA, when transformer_engine imports."""
    import torch
    from accel import Accelerator, TERecipeKwargs

    recipe = TERecipeKwargs(fp8_format="HYBRID", amax_history_len=16)
    model = gpt(width=256)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    batch = tokens(batch=16)
    try:
        importlib.import_module("transformer_engine.pytorch")
    except Exception as exc:  # an ImportError, or a broken CUDA build
        if ctx.dry_run:
            raise DryRunDone(
                f"transformer_engine absent ({type(exc).__name__}): skipped on GPU"
            ) from None
        raise Skip(f"transformer_engine does not import: {type(exc).__name__}: {exc}") from None
    ctx.ready()
    if torch.cuda.get_device_capability() < (8, 9):
        raise Skip(f"compute capability {torch.cuda.get_device_capability()} < 8.9")
    accelerator = Accelerator(mixed_precision="fp8", kwargs_handlers=[recipe])
    model, optimizer = accelerator.prepare(model, optimizer)
    te_layers = [
        m
        for m in accelerator.unwrap_model(model).modules()
        if type(m).__module__.startswith("transformer_engine")
    ]
    assert te_layers, "no TransformerEngine layer after prepare"
    losses = train(accelerator, model, optimizer, batch.to(accelerator.device), 15)
    falls(losses)
    return f"{len(te_layers)} TransformerEngine modules; loss {losses[0]:.2f} -> {losses[-1]:.2f}"


def _bnb(ctx: Context, bits: int) -> str:
    import torch
    from accel import BnbQuantizationConfig, init_empty_weights
    from accel.quantization import load_and_quantize_model

    bnb = importlib.import_module("bitsandbytes")
    if bits == 8:
        config = BnbQuantizationConfig(load_in_8bit=True, llm_int8_threshold=6.0)
        layer_type, tolerance = bnb.nn.Linear8bitLt, 0.05
    else:
        config = BnbQuantizationConfig(
            load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.bfloat16
        )
        layer_type, tolerance = bnb.nn.Linear4bit, 0.35
    reference = gpt()
    path = save_checkpoint(reference, ctx.tmp / f"bnb{bits}")
    with init_empty_weights():
        empty = gpt()
    batch = tokens()[:, :-1]
    ctx.ready()
    model = load_and_quantize_model(
        empty, bnb_quantization_config=config, weights_location=str(path), device_map={"": 0}
    )
    layer = model.blocks[0].c_fc
    assert isinstance(layer, layer_type), type(layer)
    assert layer.weight.is_cuda, layer.weight.device
    if bits == 8:
        assert layer.weight.dtype == torch.int8, layer.weight.dtype
    with torch.no_grad():
        ours = model(batch.cuda())
        theirs = reference.cuda()(batch.cuda())
    error = relative_error(ours, theirs)
    assert error < tolerance, f"relative error {error:.3f} >= {tolerance}"
    used = torch.cuda.memory_allocated()
    return f"{type(layer).__name__}, relative error {error:.3f}, {used / 2**20:.0f} MiB allocated"


def check_bnb_8bit(ctx: Context) -> str:
    """bitsandbytes LLM.int8 on CUDA through load_and_quantize_model."""
    return _bnb(ctx, 8)


def check_bnb_4bit(ctx: Context) -> str:
    """bitsandbytes NF4 (bf16 compute) on CUDA through load_and_quantize_model."""
    return _bnb(ctx, 4)


def check_dispatch_gpu_cpu_disk(ctx: Context) -> str:
    """load_checkpoint_and_dispatch with device_map="auto", max_memory forcing GPU + CPU + disk."""
    import torch
    from accel import init_empty_weights, load_checkpoint_and_dispatch

    width, blocks = 512, 8
    reference = gpt(width=width, blocks=blocks)
    path = save_checkpoint(reference, ctx.tmp / "dispatch")
    block_bytes = sum(p.numel() * 4 for p in reference.blocks[0].parameters())
    max_memory = {0: int(3.2 * block_bytes), "cpu": int(3.2 * block_bytes)}
    with init_empty_weights():
        model = gpt(width=width, blocks=blocks)
    batch = tokens(length=32)[:, :-1]
    with torch.no_grad():
        expected = reference(batch)
    ctx.ready()
    model = load_checkpoint_and_dispatch(
        model,
        str(path),
        device_map="auto",
        max_memory=max_memory,
        no_split_module_classes=["Block"],
        offload_folder=str(ctx.tmp / "offload"),
    )
    placed = {str(v) for v in model.hf_device_map.values()}
    kinds = {"gpu" if v not in ("cpu", "disk") else v for v in placed}
    assert kinds == {"gpu", "cpu", "disk"}, f"device map uses {placed}: {model.hf_device_map}"
    with torch.no_grad():
        ours = model(batch.cuda())
    error = relative_error(ours, expected)
    assert error < 1e-3, f"relative error {error:.2e} against the CPU model"
    counts = {k: sum(1 for v in model.hf_device_map.values() if str(v) == k) for k in placed}
    return f"device map {counts}, relative error {error:.1e}"


def check_regional_compile(ctx: Context) -> str:
    """Regional torch.compile (each block compiled once, reused): same outputs, trains."""
    import torch
    from accel import Accelerator, TorchDynamoPlugin

    plugin = TorchDynamoPlugin(backend="inductor", use_regional_compilation=True)
    model = gpt()
    eager = copy.deepcopy(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    batch = tokens()
    ctx.ready()
    accelerator = Accelerator(dynamo_plugin=plugin)
    model, optimizer = accelerator.prepare(model, optimizer)
    blocks = accelerator.unwrap_model(model, keep_torch_compile=True).blocks
    compiled = [  # torch.compile(block) wraps it; block.compile() compiles it in place
        b
        for b in blocks
        if hasattr(b, "_orig_mod") or getattr(b, "_compiled_call_impl", None) is not None
    ]
    assert len(compiled) == len(blocks), f"{len(compiled)} of {len(blocks)} blocks compiled"
    batch = batch.to(accelerator.device)
    eager = eager.to(accelerator.device)
    with torch.no_grad():
        error = relative_error(model(batch[:, :-1]), eager(batch[:, :-1]))
    assert error < 1e-3, f"compiled vs eager relative error {error:.2e}"
    start = time.perf_counter()
    losses = train(accelerator, model, optimizer, batch, 10)
    falls(losses)
    return f"{len(compiled)} blocks compiled, error {error:.1e}, 10 steps {time.perf_counter() - start:.1f} s"


def check_profiler_cuda(ctx: Context) -> str:
    """accelerator.profile() with CUDA activity: CUDA kernels recorded, a trace written."""
    import torch
    from accel import Accelerator, ProfileKwargs

    trace_dir = ctx.tmp / "traces"
    handler = ProfileKwargs(
        activities=["cpu", "cuda"], record_shapes=True, output_trace_dir=trace_dir
    )
    model = gpt()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    batch = tokens()
    ctx.ready()
    accelerator = Accelerator(mixed_precision="bf16", kwargs_handlers=[handler])
    model, optimizer = accelerator.prepare(model, optimizer)
    batch = batch.to(accelerator.device)
    with accelerator.profile() as prof:
        train(accelerator, model, optimizer, batch, 3)
        torch.cuda.synchronize()
    events = prof.key_averages()

    def device_time(event) -> float:
        for name in ("device_time_total", "cuda_time_total", "self_device_time_total"):
            if hasattr(event, name):
                return float(getattr(event, name))
        return 0.0

    cuda_us = sum(device_time(e) for e in events)
    assert cuda_us > 0, "no CUDA time recorded"
    traces = list(trace_dir.glob("*.json"))
    assert traces, f"no trace in {trace_dir}"
    return f"{len(events)} event kinds, {cuda_us / 1e3:.1f} ms CUDA time, trace {traces[0].name}"


def worker_cp_ring_attention(ctx: Context) -> None:
    """Per-process body of the context-parallel check: ring attention over SDPA equals full attention."""
    import torch
    from accel import Accelerator, FullyShardedDataParallelPlugin, ParallelismConfig

    config = ParallelismConfig(cp_size=2)
    plugin = FullyShardedDataParallelPlugin(state_dict_type="SHARDED_STATE_DICT")
    generator = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 4, 256, 64, generator=generator) for _ in range(3))
    ctx.ready()
    accelerator = Accelerator(mixed_precision="bf16", parallelism_config=config, fsdp_plugin=plugin)
    assert accelerator.torch_device_mesh["cp"].size() == 2
    q, k, v = (t.to(accelerator.device, torch.bfloat16).requires_grad_() for t in (q, k, v))
    full = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
    from accel_fsdp.nd import load_balanced_indices

    rank = accelerator.torch_device_mesh["cp"].get_local_rank()
    keep = load_balanced_indices(256, rank, 2).to(accelerator.device)
    expected = full.detach()[:, :, keep]
    ql, kl, vl = (t.detach().clone().requires_grad_() for t in (q, k, v))
    with accelerator.maybe_context_parallel(
        buffers=[ql, kl, vl], buffer_seq_dims=[2, 2, 2], no_restore_buffers={ql, kl, vl}
    ):
        out = torch.nn.functional.scaled_dot_product_attention(ql, kl, vl, is_causal=True)
        out.float().pow(2).mean().backward()
    assert out.shape == expected.shape, (out.shape, expected.shape)
    error = relative_error(out.detach().float(), expected.float())
    assert error < 2e-2, f"ring attention differs from full attention: relative error {error:.3g}"
    assert all(t.grad is not None and torch.isfinite(t.grad).all() for t in (ql, kl, vl))
    if accelerator.is_main_process:
        print(f"ok cp ring attention over 2 ranks, relative error {error:.2g}")
    accelerator.end_training()


def check_cp_ring_attention(ctx: Context) -> str:
    """Context parallelism (cp_size=2, torch ring attention over SDPA) on two GPUs (skipped with fewer)."""
    if not ctx.dry_run and ctx.gpus() < 2:
        raise Skip(f"{ctx.gpus()} GPU(s): context parallelism needs 2")
    flags = ["--multi_gpu", "--num_processes", "2"]
    return ctx.launch("cp_ring_attention", flags, timeout=150, expect="ok cp")


WORKERS: dict[str, Callable[[Context], None]] = {
    "cp_ring_attention": worker_cp_ring_attention,
    "ddp": worker_ddp,
    "fsdp2_offload": worker_fsdp2_offload,
}
"""Per-process bodies of launched checks (``gpu_check.py --worker NAME`` under ``accel launch``)."""

CHECKS: list[Check] = [
    Check("bf16_train", check_bf16_train),
    Check("fp16_grad_scaler", check_fp16_grad_scaler),
    Check("ddp_nccl_1proc", check_ddp_nccl_1proc, timeout=160),
    Check("ddp_nccl_2proc", check_ddp_nccl_2proc, timeout=160),
    Check("fsdp2_cpu_offload", check_fsdp2_cpu_offload, timeout=190),
    Check("deepspeed_zero2", check_deepspeed_zero2, timeout=150),
    Check("deepspeed_zero3", check_deepspeed_zero3, timeout=150),
    Check("fp8_torchao", check_fp8_torchao, timeout=120),
    Check("fp8_transformer_engine", check_fp8_transformer_engine, timeout=120),
    Check("bnb_8bit", check_bnb_8bit),
    Check("bnb_4bit", check_bnb_4bit),
    Check("dispatch_gpu_cpu_disk", check_dispatch_gpu_cpu_disk),
    Check("regional_compile", check_regional_compile, timeout=240),
    Check("profiler_cuda", check_profiler_cuda),
    Check("cp_ring_attention", check_cp_ring_attention, timeout=160),
]
"""Every check, in the order they run. Add one line per new check."""


# --------------------------------------------------------------------------- step time
def check_step_time(ctx: Context, rounds: int = 7, steps: int = 20) -> str:
    """Median step time of a small GPT in bf16: plain PyTorch, accel, Accelerate, as ratios."""
    import torch

    width, blocks, batch_size, length = 768, 6, 8, 256
    # accel's compat distribution (also named accelerate) is the one that requires accel-core
    have_accelerate = importlib.util.find_spec("accelerate") is not None and not any(
        r.startswith("accel-core") for r in importlib.metadata.requires("accelerate") or []
    )
    batch = tokens(batch=batch_size, length=length, vocab=512)
    models = {"plain": gpt(width, blocks, heads=12, context=length)}
    models["accel"] = copy.deepcopy(models["plain"])
    if have_accelerate:
        models["accelerate"] = copy.deepcopy(models["plain"])
    from accel import Accelerator

    if ctx.dry_run:
        raise DryRunDone(f"variants {', '.join(models)}")
    ctx.ready()
    device = torch.device("cuda")
    batch = batch.to(device)
    runs: dict[str, Callable[[], None]] = {}

    plain = models["plain"].to(device)
    plain_opt = torch.optim.AdamW(plain.parameters(), lr=1e-4, fused=True)

    def plain_step() -> None:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = lm_loss(plain, batch)
        loss.backward()
        plain_opt.step()
        plain_opt.zero_grad()

    runs["plain"] = plain_step

    def framework(accelerator_cls, model) -> Callable[[], None]:
        accelerator = accelerator_cls(mixed_precision="bf16")
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
        model, optimizer = accelerator.prepare(model.to(device), optimizer)

        def step() -> None:
            with accelerator.accumulate(model):
                loss = lm_loss(model, batch)
                accelerator.backward(loss)
                optimizer.step()
                optimizer.zero_grad()

        return step

    runs["accel"] = framework(Accelerator, models["accel"])
    if have_accelerate:
        from accelerate import Accelerator as AccelerateAccelerator

        runs["accelerate"] = framework(AccelerateAccelerator, models["accelerate"])
    for run in runs.values():  # warm-up: kernels, allocator, cuBLAS handles
        for _ in range(5):
            run()
    torch.cuda.synchronize()
    times: dict[str, list[float]] = {name: [] for name in runs}
    names = list(runs)
    for index in range(rounds):
        for name in names if index % 2 == 0 else names[::-1]:
            torch.cuda.synchronize()
            start = time.perf_counter()
            for _ in range(steps):
                runs[name]()
            torch.cuda.synchronize()
            times[name].append((time.perf_counter() - start) / steps)
    lines = [
        f"step time, GPT {blocks}x{width} bf16, batch {batch_size}x{length}, AdamW fused, "
        f"{rounds} rounds x {steps} steps (median):"
    ]
    for name in names:
        ratios = [t / p for t, p in zip(times[name], times["plain"])]
        lines.append(
            f"  {name:<11} {statistics.median(times[name]) * 1e3:8.2f} ms/step  "
            f"{statistics.median(ratios):.3f}x plain"
        )
    if not have_accelerate:
        lines.append(
            "  (Accelerate not in this environment: uv run python tools/bench/accelerate_env.py tools/gpu_check.py)"
        )
    return "\n".join(lines)


STEP_TIME = Check("step_time", check_step_time, timeout=150)
"""The step-time comparison, run after the checks (``--no-step-time`` leaves it out)."""


# --------------------------------------------------------------------------- driver
def _alarm(seconds: float) -> None:
    def expired(_signum, _frame):
        raise TimeoutError(f"time limit of {seconds:.0f} s exceeded")

    signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)


def run_in_process(check: Check, ctx: Context, timeout: float) -> tuple[str, str]:
    """Run ``check`` here, under a SIGALRM time limit; returns (status, reason)."""
    _alarm(timeout)
    try:
        note = check.function(ctx)
        return "PASS", note or ""
    except DryRunDone as exc:
        return "PASS", "dry run: built" + (f"; {exc}" if str(exc) else "")
    except Skip as exc:
        return "SKIP", str(exc)
    except BaseException as exc:  # a failure, a timeout, a SystemExit from a library
        if isinstance(exc, KeyboardInterrupt):
            raise
        detail = traceback.format_exc(limit=-3).strip().splitlines()
        where = next(
            (line.strip() for line in reversed(detail) if line.strip().startswith("File")), ""
        )
        return "FAIL", f"{type(exc).__name__}: {str(exc).strip()[:600]} [{where}]"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def run_isolated(check: Check, tmp: Path, timeout: float, dry_run: bool) -> tuple[str, str]:
    """Run ``check`` in a fresh interpreter (``--child``) with a hard time limit."""
    command = [sys.executable, str(SCRIPT), "--child", check.name, "--tmp", str(tmp)]
    if dry_run:
        command.append("--dry-run")
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout + 15)
    except subprocess.TimeoutExpired:
        return "FAIL", f"killed after {timeout + 15:.0f} s"
    for line in reversed(done.stdout.splitlines()):
        if line.startswith("CHILD "):
            result = json.loads(line[len("CHILD ") :])
            return result["status"], result["reason"]
    tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-4:])
    return "FAIL", f"exit {done.returncode} without a result: {tail[-600:]}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dry-run", action="store_true", help="CPU only: build, do not run")
    parser.add_argument("--only", help="comma-separated check names")
    parser.add_argument("--list", action="store_true", help="list the checks and exit")
    parser.add_argument("--isolate", action="store_true", help="dry run: one process per check")
    parser.add_argument("--no-step-time", action="store_true", help="skip the step-time table")
    parser.add_argument("--budget", type=float, default=TOTAL_BUDGET_S, help="seconds in all")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--tmp", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.list:
        for check in [*CHECKS, STEP_TIME]:
            doc = (check.function.__doc__ or "").strip().splitlines()[0]
            print(f"{check.name:<24} {check.timeout:>5.0f} s  {doc}")
        return 0
    if args.worker:  # one process of a launched check
        WORKERS[args.worker](Context(dry_run=False, tmp=Path(args.tmp)))
        return 0
    if args.child:  # one isolated check
        check = next(c for c in [*CHECKS, STEP_TIME] if c.name == args.child)
        status, reason = run_in_process(check, Context(args.dry_run, Path(args.tmp)), check.timeout)
        print("CHILD " + json.dumps({"status": status, "reason": reason}), flush=True)
        return 0

    selected = CHECKS
    if args.only:
        wanted = set(args.only.split(","))
        unknown = wanted - {c.name for c in [*CHECKS, STEP_TIME]}
        if unknown:
            parser.error(f"unknown check(s) {sorted(unknown)}; see --list")
        selected = [c for c in [*CHECKS, STEP_TIME] if c.name in wanted]
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    started = time.perf_counter()
    tmp = Path(tempfile.mkdtemp(prefix="accel-gpu-check-"))
    print(_environment(args.dry_run), flush=True)
    failures = 0
    try:
        if not args.no_step_time and not args.only:
            selected = [*selected, STEP_TIME]
        for check in selected:
            left = args.budget - (time.perf_counter() - started)
            if left < 20 and not args.dry_run:
                print(f"SKIP {check.name} 0.0 the {args.budget:.0f} s budget is spent", flush=True)
                continue
            folder = tmp / check.name
            folder.mkdir()
            timeout = min(check.timeout, max(left, 20))
            begin = time.perf_counter()
            if args.dry_run and not args.isolate:
                status, reason = run_in_process(check, Context(True, folder), timeout)
            else:
                status, reason = run_isolated(check, folder, timeout, args.dry_run)
            failures += status == "FAIL"
            first, *more = reason.splitlines() or [""]
            print(
                f"{status} {check.name} {time.perf_counter() - begin:.1f} {' '.join(first.split())}"
            )
            for line in more:  # the step-time table
                print(line)
            sys.stdout.flush()
    finally:
        if args.keep:
            print(f"scratch folder kept: {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"total {time.perf_counter() - started:.1f} s, {failures} failure(s)")
    return 1 if failures else 0


def _environment(dry_run: bool) -> str:
    import torch

    parts = [f"torch {torch.__version__}", f"CUDA {torch.version.cuda}"]
    if torch.cuda.is_available():
        names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        capability = ".".join(map(str, torch.cuda.get_device_capability()))
        parts.append(f"{len(names)} GPU(s): {', '.join(sorted(set(names)))} (sm {capability})")
    else:
        parts.append("no CUDA device")
    for package in (
        "accel",
        "accelerate",
        "deepspeed",
        "bitsandbytes",
        "torchao",
        "transformer_engine",
    ):
        spec = importlib.util.find_spec(package)
        if spec is None:
            parts.append(f"{package} -")
            continue
        try:
            from importlib.metadata import version

            name = {"accel": "accel-core", "transformer_engine": "transformer-engine"}.get(
                package, package
            )
            parts.append(f"{package} {version(name)}")
        except Exception:
            parts.append(f"{package} ?")
    return ("dry run: " if dry_run else "") + "; ".join(parts)


if __name__ == "__main__":
    sys.exit(main())
