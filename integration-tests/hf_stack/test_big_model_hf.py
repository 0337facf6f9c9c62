"""Big-model inference of the real transformers / diffusers / PEFT running on accel.

Tiny models are built and saved locally (nothing reaches the Hub); the ``accelerate`` they
import is accel (packages/accelerate-compat). On the CPU the offloading paths run with the CPU
as execution device; what needs an accelerator is skipped with the reason.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

transformers = pytest.importorskip("transformers")
import accelerate  # noqa: E402  (the workspace always has the compat distribution: never a skip)

sys.path.insert(0, str(Path(__file__).parent))
import tiny  # noqa: E402

CPU_BUDGET = "70KB"
"""RAM budget that splits the tiny Llama below between the CPU (embeddings) and the disk."""


def _tiny_llama_config():
    return transformers.LlamaConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=128,
        max_position_embeddings=64,
        tie_word_embeddings=False,
    )


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    """A tiny Llama saved with ``save_pretrained``: (folder, input ids, reference logits, model)."""
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(_tiny_llama_config()).eval()
    folder = tmp_path_factory.mktemp("llama")
    model.save_pretrained(folder)
    ids = torch.randint(0, 128, (1, 8), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        logits = model(ids).logits
    return folder, ids, logits, model


@pytest.fixture(scope="module")
def offloaded_llama(llama, tmp_path_factory):
    """The tiny Llama loaded with ``device_map="auto"`` over the CPU and the disk, and its max_memory."""
    folder = llama[0]
    max_memory = {"cpu": CPU_BUDGET}
    model = transformers.AutoModelForCausalLM.from_pretrained(
        folder,
        device_map="auto",
        max_memory=max_memory,
        offload_folder=tmp_path_factory.mktemp("offload"),
    )
    return model, max_memory


def test_from_pretrained_auto_map_over_cpu_and_disk_gives_the_same_logits(llama, offloaded_llama):
    _, ids, expected, _ = llama
    model, max_memory = offloaded_llama
    assert set(model.hf_device_map.values()) == {"cpu", "disk"}, model.hf_device_map
    assert max_memory == {"cpu": 70_000}  # converted in place, as transformers needs
    disk_layer = model.model.layers[1].mlp.down_proj
    assert disk_layer.weight.device.type == "meta"  # only loaded during its forward
    assert isinstance(disk_layer._hf_hook, accelerate.hooks.AlignDevicesHook)
    with torch.no_grad():
        assert torch.allclose(model(ids).logits, expected, atol=1e-5)
        generated = model.generate(ids, max_new_tokens=3, do_sample=False)
        reference = llama[3].generate(ids, max_new_tokens=3, do_sample=False)
    assert torch.equal(generated, reference)
    assert disk_layer.weight.device.type == "meta"


def test_from_pretrained_gives_accelerates_device_map_in_its_order(tmp_path):
    """A tied GPT-2 over the CPU and the disk: ``hf_device_map`` is Accelerate's, key order included.

    The order is what users see (the first entry is read as the main device). The map comes
    from the parity reference that Accelerate itself wrote
    (packages/accel-core/tests/big_model/accelerate_device_maps.json).
    """
    import importlib.util
    import json

    big_model = Path(__file__).resolve().parents[2] / "packages/accel-core/tests/big_model"
    spec = importlib.util.spec_from_file_location("device_map_zoo", big_model / "device_map_zoo.py")
    zoo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(zoo)
    reference = json.loads((big_model / "accelerate_device_maps.json").read_text())
    model = zoo.build("gpt2")
    model.save_pretrained(tmp_path / "gpt2")
    budgets = reference["budgets"]["gpt2"]
    (entry,) = [
        e
        for e in reference["infer_auto_device_map"]
        if e["model"] == "gpt2"
        and e["options"] == {"no_split_module_classes": list(model._no_split_modules)}
        and {d for d, _ in budgets[e["budget"]]} == {"cpu", "disk"}
    ]
    assert not entry.get("order_depends_on_hash_seed")
    loaded = transformers.AutoModelForCausalLM.from_pretrained(
        tmp_path / "gpt2",
        device_map="auto",
        max_memory=zoo.decode_budget(budgets[entry["budget"]]),
        offload_folder=tmp_path / "offload",
    )
    expected = [tuple(item) for item in entry["device_map"]]
    assert list(loaded.hf_device_map.items()) == expected
    assert expected[:2] == [("transformer.wte", "cpu"), ("lm_head", "cpu")]  # tied: together


def test_save_pretrained_of_the_offloaded_model_reloads_the_same_weights(
    llama, offloaded_llama, tmp_path
):
    model, _ = offloaded_llama
    model.save_pretrained(tmp_path)  # reads disk weights back through module._hf_hook
    reloaded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path)
    expected = llama[3].state_dict()
    state = reloaded.state_dict()
    assert set(state) == set(expected)
    for name, tensor in expected.items():
        assert torch.equal(state[name], tensor), name


def test_peft_lora_on_a_disk_offloaded_model_loads_and_merges(llama, tmp_path, monkeypatch):
    peft = pytest.importorskip("peft")
    folder, ids, _, _ = llama
    # PEFT rewrites the offloaded safetensors under a path relative to the working directory
    monkeypatch.chdir(tmp_path)
    config = peft.LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False)
    torch.manual_seed(2)
    plain = peft.get_peft_model(transformers.AutoModelForCausalLM.from_pretrained(folder), config)
    plain.save_pretrained(tmp_path / "adapter")
    with torch.no_grad():
        expected = plain(ids).logits

    offload = tmp_path / "offload"
    base = transformers.AutoModelForCausalLM.from_pretrained(
        folder, device_map="auto", max_memory={"cpu": CPU_BUDGET}, offload_folder=offload
    )
    assert "disk" in base.hf_device_map.values()
    model = peft.PeftModel.from_pretrained(
        base, tmp_path / "adapter", max_memory={"cpu": CPU_BUDGET}, offload_folder=offload
    )
    q_proj = model.base_model.model.model.layers[1].self_attn.q_proj
    assert q_proj.base_layer._hf_hook.offload  # PEFT found and kept accel's hook
    with torch.no_grad():
        assert torch.allclose(model(ids).logits, expected, atol=1e-5)
    merged = model.merge_and_unload()  # onloads each offloaded layer through its hook
    with torch.no_grad():
        assert torch.allclose(merged(ids).logits, expected, atol=1e-5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_from_pretrained_over_gpu_cpu_and_disk(llama, tmp_path):
    folder, ids, expected, _ = llama
    model = transformers.AutoModelForCausalLM.from_pretrained(
        folder,
        device_map="auto",
        max_memory={0: "40KB", "cpu": "40KB"},
        offload_folder=tmp_path,
    )
    assert {0, "cpu", "disk"} <= set(model.hf_device_map.values()), model.hf_device_map
    with torch.no_grad():
        output = model(ids.to(0)).logits
    assert torch.allclose(output.cpu(), expected, atol=1e-4)


# -- diffusers ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def diffusers_module():
    return pytest.importorskip("diffusers")


@pytest.fixture(scope="module")
def vae(diffusers_module, tmp_path_factory):
    """A tiny AutoencoderKL saved locally: (folder, model, input, reference output)."""
    torch.manual_seed(0)
    model = diffusers_module.AutoencoderKL(
        in_channels=3,
        out_channels=3,
        down_block_types=("DownEncoderBlock2D",),
        up_block_types=("UpDecoderBlock2D",),
        block_out_channels=(8,),
        layers_per_block=1,
        latent_channels=4,
        norm_num_groups=4,
        sample_size=16,
    ).eval()
    folder = tmp_path_factory.mktemp("vae")
    model.save_pretrained(folder)
    x = torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = model(x).sample
    return folder, model, x, expected


@pytest.fixture(scope="module")
def pipeline(diffusers_module):
    """A tiny DDPM pipeline (UNet2DModel + scheduler) and its reference images."""
    torch.manual_seed(0)
    unet = tiny.unet2d(channels=3).eval()
    scheduler = diffusers_module.DDPMScheduler(num_train_timesteps=10)
    pipe = diffusers_module.DDPMPipeline(unet=unet, scheduler=scheduler)
    pipe.set_progress_bar_config(disable=True)
    return pipe, _run(pipe)


def _run(pipe):
    generator = torch.Generator().manual_seed(0)
    return pipe(generator=generator, num_inference_steps=2, output_type="np").images


def test_diffusers_from_pretrained_loads_through_set_module_tensor_to_device(diffusers_module, vae):
    folder, _, x, expected = vae
    # the low_cpu_mem_usage loader passes non_blocking=True, clear_cache=False
    loaded = diffusers_module.AutoencoderKL.from_pretrained(folder)
    with torch.no_grad():
        assert torch.equal(loaded(x).sample, expected)


def test_diffusers_device_map_over_cpu_and_disk(diffusers_module, vae, tmp_path):
    folder, reference, x, expected = vae
    model = diffusers_module.AutoencoderKL.from_pretrained(
        folder, device_map="auto", max_memory={"cpu": "20KB"}, offload_folder=tmp_path
    )
    assert set(model.hf_device_map.values()) == {"cpu", "disk"}, model.hf_device_map
    with torch.no_grad():
        assert torch.allclose(model(x).sample, expected, atol=1e-5)
        latents = model.encode(x).latent_dist.mode()
        assert torch.allclose(latents, reference.encode(x).latent_dist.mode(), atol=1e-5)


def test_vae_apply_forward_hook_fires_the_accel_hook(vae):
    _, model, x, _ = vae
    calls = []

    class Record(accelerate.hooks.ModelHook):
        def pre_forward(self, module, *args, **kwargs):
            calls.append(type(module).__name__)
            return args, kwargs

    accelerate.hooks.add_hook_to_module(model, Record())
    try:
        with torch.no_grad():
            model.encode(x)  # decorated with diffusers' apply_forward_hook: reads _hf_hook
    finally:
        accelerate.hooks.remove_hook_from_module(model)
    assert calls == ["AutoencoderKL"]


def test_pipeline_sequential_cpu_offload_on_the_cpu(pipeline):
    pipe, expected = pipeline
    pipe.enable_sequential_cpu_offload(device="cpu")
    try:
        unet = pipe.unet
        assert isinstance(unet._hf_hook, accelerate.hooks.AlignDevicesHook)
        assert unet.conv_in._hf_hook.offload and unet.conv_in.weight.device.type == "meta"
        assert pipe._execution_device == torch.device("cpu", 0)  # read from the hooks
        assert (_run(pipe) == expected).all()
    finally:
        pipe.remove_all_hooks()
    assert not any(hasattr(m, "_hf_hook") for m in pipe.unet.modules())
    assert "forward" not in pipe.unet.__dict__
    assert pipe.unet.conv_in.weight.device.type == "cpu"
    assert (_run(pipe) == expected).all()


def test_pipeline_model_cpu_offload_on_the_cpu(pipeline):
    pipe, expected = pipeline
    pipe.enable_model_cpu_offload(device="cpu")
    try:
        assert isinstance(pipe.unet._hf_hook, accelerate.hooks.CpuOffload)
        assert len(pipe._all_hooks) == 1
        assert (_run(pipe) == expected).all()  # ends with maybe_free_model_hooks: hooks again
        assert isinstance(pipe.unet._hf_hook, accelerate.hooks.CpuOffload)
    finally:
        pipe.remove_all_hooks()
    assert not hasattr(pipe.unet, "_hf_hook") and "forward" not in pipe.unet.__dict__


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_pipeline_offload_to_the_gpu(pipeline):
    pipe, expected = pipeline
    for enable in (pipe.enable_model_cpu_offload, pipe.enable_sequential_cpu_offload):
        enable()
        try:
            assert pipe._execution_device.type == "cuda"
            assert abs(_run(pipe) - expected).max() < 1e-3
        finally:
            pipe.remove_all_hooks()
