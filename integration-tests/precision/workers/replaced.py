"""One real process (a one-process gloo group): a precision set with ``accelerator.precision = ...`` before
``prepare`` reaches each backend, which reads the object (its ``dtype``), not a name.

Every Accelerator is created with ``mixed_precision="no"`` and given ``BF16Precision`` before
``prepare``. Prints ``ok <backend>`` per backend; any failure raises (non-zero exit).
"""

from __future__ import annotations

import os
import sys

import torch
from accel import Accelerator
from accel.distributed.process import ensure_process_group
from accel.errors import ConfigError
from accel.precision.native import BF16Precision
from accel.state import AcceleratorState, GradientState


def report(message: str) -> None:
    sys.stdout.write(f"ok {message}\n")
    sys.stdout.flush()


def fresh(**kwargs) -> Accelerator:
    """A new Accelerator in full precision, then given bf16 before anything is prepared."""
    AcceleratorState._reset_state()
    GradientState._reset_state()
    accelerator = Accelerator(mixed_precision="no", **kwargs)
    accelerator.precision = BF16Precision("bf16", accelerator.device, {})
    # the name is derived from the object, wherever it is read
    assert accelerator.mixed_precision == "bf16", accelerator.mixed_precision
    assert accelerator.backend.context.mixed_precision == "bf16"
    return accelerator


def weight_dtypes(model: torch.nn.Module, layer: torch.nn.Module) -> list[torch.dtype]:
    """The dtype of ``layer``'s weight as its forward sees it, for one forward of ``model``."""
    seen: list[torch.dtype] = []
    handle = layer.register_forward_pre_hook(lambda m, args: seen.append(m.weight.dtype))
    model(torch.randn(2, 8))
    handle.remove()
    return seen


def check_ddp() -> None:
    ensure_process_group()  # DDP needs a group; FSDP, DeepSpeed and Megatron-LM make theirs
    os.environ["ACCEL_BACKEND"] = "ddp"
    try:
        accelerator = fresh()
    finally:
        del os.environ["ACCEL_BACKEND"]
    assert type(accelerator.backend).__name__ == "DDPBackend", type(accelerator.backend)
    model = accelerator.prepare(torch.nn.Sequential(torch.nn.Linear(8, 8)))
    seen: list[torch.dtype] = []
    inner = accelerator.unwrap_model(model)[0]
    inner.register_forward_hook(lambda m, args, out: seen.append(out.dtype))
    model(torch.randn(2, 8))
    assert seen == [torch.bfloat16], seen  # the forward ran under the replaced precision
    report("ddp")


def check_fsdp() -> None:
    from accel_fsdp import FullyShardedDataParallelPlugin

    accelerator = fresh(fsdp_plugin=FullyShardedDataParallelPlugin(fsdp_version=2))
    net = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 1))
    model = accelerator.prepare(net)
    # FSDP2's MixedPrecisionPolicy casts the gathered parameters to the precision's dtype
    assert weight_dtypes(model, net[0]) == [torch.bfloat16], weight_dtypes(model, net[0])
    report("fsdp")


def check_deepspeed() -> None:
    from accel_deepspeed import DeepSpeedPlugin

    plugin = DeepSpeedPlugin(zero_stage=2)
    accelerator = fresh(deepspeed_plugin=plugin)
    model = torch.nn.Linear(8, 1)
    loader = torch.utils.data.DataLoader(torch.randn(8, 8), batch_size=2)
    accelerator.prepare(model, torch.optim.SGD(model.parameters(), lr=0.1), loader)
    engine = accelerator.backend.engines[0]  # its config's fp16 / bf16 sections, filled
    assert engine.bfloat16_enabled() and not engine.fp16_enabled()
    assert next(engine.parameters()).dtype == torch.bfloat16  # the engine cast the model
    assert plugin._zero_init_config()["bf16"] == {"enabled": True}  # ZeRO-3 init: the same rule
    report("deepspeed")


def check_megatron() -> None:
    from accel_megatron import MegatronLMPlugin, build_gpt_model

    plugin = MegatronLMPlugin(tp_degree=1, pp_degree=1)
    accelerator = fresh(megatron_lm_plugin=plugin)
    assert plugin.mixed_precision == "bf16" and plugin.precision is accelerator.precision
    model = build_gpt_model(16, 8, num_layers=1, hidden_size=8, num_attention_heads=1)
    qkv = model.decoder.layers[0].self_attention.linear_qkv.weight
    assert qkv.dtype == torch.bfloat16, qkv.dtype  # the TransformerConfig's params_dtype
    try:  # the backend's optimizer config sees bf16 too (megatron-core's is CUDA-only)
        accelerator.prepare(model, torch.optim.AdamW(model.parameters(), lr=0.1))
    except ConfigError as error:
        assert "mixed_precision=bf16 under MEGATRON_LM needs CUDA" in str(error), error
    else:
        raise AssertionError("the Megatron-LM backend built an fp32 optimizer")
    report("megatron")


if __name__ == "__main__":
    for check in sys.argv[1:]:
        globals()[f"check_{check}"]()
