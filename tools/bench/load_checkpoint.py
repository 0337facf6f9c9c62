"""Loading a big sharded checkpoint into an empty model: accel vs plain PyTorch (and Accelerate).

A ~1.5 GB fp32 checkpoint (sharded safetensors with an index JSON) is written to a temporary
folder. Each variant then runs in a fresh Python process:

1. import torch and the library, note the RSS (the baseline) and reset the peak-RSS counter;
2. build the model under ``init_empty_weights`` (plain PyTorch: ``torch.device("meta")``);
3. load the checkpoint with ``device_map={"": "cpu"}`` (plain PyTorch: ``safetensors``
   ``load_file`` per shard + ``load_state_dict(assign=True)``);
4. run one forward pass that uses every weight.

Reported per variant (median over rounds): load time (step 3), time to first output (steps
2-4), and peak RSS above the baseline, also as a multiple of the checkpoint size. Rounds
alternate the order of the variants; the files are read once beforehand so every variant
finds them in the page cache.

    uv run python tools/bench/load_checkpoint.py
    uv run python tools/bench/accelerate_env.py tools/bench/load_checkpoint.py     # adds Accelerate

Targets: accel's time to first output <= Accelerate's, its peak RSS above baseline
<= 1.05x the checkpoint size. This is a benchmark, not a test: it exits 0 whatever the
figures, unless ``--fail`` is given and a target is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from accelerate_env import ACCELERATE_HINT, has_real_accelerate  # tools/bench/, beside this file

HIDDEN = 4096
RSS_TARGET = 1.05


def build_model(layers: int):
    """A stack of ``layers`` Linear(HIDDEN, HIDDEN) with tanh in between."""
    import torch
    from torch import nn

    class Stack(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.layers = nn.ModuleList(nn.Linear(HIDDEN, HIDDEN) for _ in range(layers))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            for layer in self.layers:
                x = torch.tanh(layer(x))
            return x

    return Stack()


def generate(folder: str, size_gb: float) -> dict:
    """Write the checkpoint: shards of about 500 MB and ``model.safetensors.index.json``."""
    import torch
    from safetensors.torch import save_file

    per_layer = (HIDDEN * HIDDEN + HIDDEN) * 4
    layers = max(2, round(size_gb * 1e9 / per_layer))
    per_shard = max(1, int(500e6 // per_layer))
    os.makedirs(folder, exist_ok=True)
    generator = torch.Generator().manual_seed(0)
    shards = [range(i, min(i + per_shard, layers)) for i in range(0, layers, per_shard)]
    weight_map = {}
    total = 0
    for number, shard in enumerate(shards, start=1):
        name = f"model-{number:05d}-of-{len(shards):05d}.safetensors"
        tensors = {}
        for i in shard:
            tensors[f"layers.{i}.weight"] = torch.randn(HIDDEN, HIDDEN, generator=generator) * 0.02
            tensors[f"layers.{i}.bias"] = torch.zeros(HIDDEN)
        save_file(tensors, os.path.join(folder, name), metadata={"format": "pt"})
        for key, tensor in tensors.items():
            weight_map[key] = name
            total += tensor.numel() * tensor.element_size()
        del tensors
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f)
    return {"layers": layers, "bytes": total, "shards": len(shards)}


def _rss_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def _reset_peak() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def worker(variant: str, folder: str, layers: int) -> None:
    """One measurement in this (fresh) process; prints one JSON line."""
    import torch

    torch.set_num_threads(max(1, os.cpu_count() or 1))
    if variant == "accel":
        from accel import init_empty_weights, load_checkpoint_and_dispatch
    elif variant == "accelerate":
        from accelerate import init_empty_weights, load_checkpoint_and_dispatch
    else:
        import safetensors.torch  # noqa: F401
    x = torch.randn(1, HIDDEN, generator=torch.Generator().manual_seed(1))
    baseline = _rss_kb("VmRSS")
    reset = _reset_peak()

    start = time.perf_counter()
    if variant == "torch":
        from safetensors.torch import load_file

        with torch.device("meta"):
            model = build_model(layers)
        built = time.perf_counter()
        with open(os.path.join(folder, "model.safetensors.index.json")) as f:
            shards = sorted(set(json.load(f)["weight_map"].values()))
        for shard in shards:
            model.load_state_dict(load_file(os.path.join(folder, shard)), strict=False, assign=True)
    else:
        with init_empty_weights():
            model = build_model(layers)
        built = time.perf_counter()
        model = load_checkpoint_and_dispatch(model, folder, device_map={"": "cpu"})
    loaded = time.perf_counter()
    with torch.no_grad():
        output = model(x)
    done = time.perf_counter()
    checksum = float(output.double().sum())

    peak = _rss_kb("VmHWM") if reset else _rss_kb("VmRSS")
    print(
        json.dumps(
            {
                "variant": variant,
                "build_s": built - start,
                "load_s": loaded - built,
                "forward_s": done - loaded,
                "first_output_s": done - start,
                "baseline_mb": baseline / 1024,
                "peak_above_mb": (peak - baseline) / 1024,
                "checksum": checksum,
                "peak_exact": reset,
            }
        )
    )


def run_variant(variant: str, folder: str, layers: int) -> dict:
    command = [
        sys.executable,
        __file__,
        "--worker",
        variant,
        "--dir",
        folder,
        "--layers",
        str(layers),
    ]
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    if result.returncode != 0:
        raise RuntimeError(f"{variant} failed:\n{result.stdout}\n{result.stderr}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def _warm(folder: str) -> None:
    for name in os.listdir(folder):
        with open(os.path.join(folder, name), "rb") as f:
            while f.read(64 << 20):
                pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size-gb", type=float, default=1.5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", help="use (or create) the checkpoint here instead of a temp dir")
    parser.add_argument("--fail", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--layers", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--generate", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.worker:
        worker(args.worker, args.dir, args.layers)
        return 0
    if args.generate:
        print(json.dumps(generate(args.dir, args.size_gb)))
        return 0

    variants = ["torch", "accel"]
    if has_real_accelerate():
        variants.append("accelerate")
    else:
        print("Accelerate is not in this environment: " + ACCELERATE_HINT)

    folder = args.dir or tempfile.mkdtemp(prefix="accel-bench-ckpt-")
    try:
        index = os.path.join(folder, "model.safetensors.index.json")
        if os.path.exists(index):
            with open(index) as f:
                data = json.load(f)
            info = {
                "bytes": data["metadata"]["total_size"],
                "layers": len(data["weight_map"]) // 2,
                "shards": len(set(data["weight_map"].values())),
            }
        else:
            command = [sys.executable, __file__, "--generate", "--dir", folder]
            command += ["--size-gb", str(args.size_gb)]
            result = subprocess.run(command, capture_output=True, text=True, check=True)
            info = json.loads(result.stdout.strip().splitlines()[-1])
        size_mb = info["bytes"] / 2**20
        print(
            f"checkpoint: {info['bytes'] / 1e9:.2f} GB fp32 in {info['shards']} safetensors shards, "
            f"{info['layers']} x Linear({HIDDEN}, {HIDDEN}); {args.rounds} rounds, "
            f"{os.cpu_count()} CPUs"
        )
        _warm(folder)
        results: dict[str, list[dict]] = {v: [] for v in variants}
        for round_number in range(args.rounds):
            order = variants if round_number % 2 == 0 else list(reversed(variants))
            for variant in order:
                results[variant].append(run_variant(variant, folder, info["layers"]))
    finally:
        if not args.dir:
            shutil.rmtree(folder, ignore_errors=True)

    def median(variant: str, key: str) -> float:
        return statistics.median(r[key] for r in results[variant])

    checksums = {v: {round(r["checksum"], 3) for r in results[v]} for v in variants}
    print()
    print(
        f"{'variant':<11} {'load s':>8} {'forward s':>10} {'first output s':>15} {'peak RSS above baseline':>26}"
    )
    for variant in variants:
        peak = median(variant, "peak_above_mb")
        print(
            f"{variant:<11} {median(variant, 'load_s'):>8.3f} {median(variant, 'forward_s'):>10.3f} "
            f"{median(variant, 'first_output_s'):>15.3f} "
            f"{peak:>13.0f} MB = {peak / size_mb:.3f}x ckpt"
        )
    if len({frozenset(c) for c in checksums.values()}) > 1:
        print(f"WARNING: outputs differ between variants: {checksums}")

    ok = True
    accel_first = median("accel", "first_output_s")
    accel_rss = median("accel", "peak_above_mb") / size_mb
    print()
    print(f"accel / torch first output: {accel_first / median('torch', 'first_output_s'):.2f}x")
    if "accelerate" in variants:
        ratio = accel_first / median("accelerate", "first_output_s")
        print(f"accel / Accelerate first output: {ratio:.2f}x (target <= 1.00)")
        ok &= ratio <= 1.0
    print(f"accel peak RSS above baseline: {accel_rss:.3f}x checkpoint (target <= {RSS_TARGET})")
    ok &= accel_rss <= RSS_TARGET
    if not all(r["peak_exact"] for rs in results.values() for r in rs):
        print("note: /proc/self/clear_refs unavailable, peak RSS is the RSS after the forward")
    return 1 if args.fail and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
