"""Regenerate the reference device maps of the parity test from Hugging Face Accelerate.

    uv run python tools/bench/accelerate_env.py tools/gen_device_map_reference.py

Runs Accelerate's ``infer_auto_device_map`` and ``get_balanced_memory`` on every case of
``packages/accel-core/tests/big_model/device_map_zoo.py`` (models x budgets x options)
and writes what it returns, with the warnings it gives, to
``packages/accel-core/tests/big_model/accelerate_device_maps.json``. The test
(``test_device_map_parity.py``) compares accel's results with that file, so it needs no
Accelerate. Rerun after changing the zoo or to compare with a newer Accelerate; the
hash seed is pinned because Accelerate orders tied-weight groups through a set. The zoo's
GPT-2 needs transformers in that environment too, at the workspace's version:

    uv pip install --python "$(uv run python tools/bench/accelerate_env.py --python)" \
        transformers==<uv run python -c "import transformers; print(transformers.__version__)">

The order of a map's keys is part of the reference (transformers shows it as
``model.hf_device_map``), but where ``clean_device_map`` merges sibling modules Accelerate
orders them through a set of names: the cases are run again under other hash seeds and an
entry whose order changes gets ``"order_depends_on_hash_seed": true`` (the test then
compares it as a dict).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HERE = REPO / "packages" / "accel-core" / "tests" / "big_model"
OUTPUT = HERE / "accelerate_device_maps.json"
ORDER_SEEDS = ("1", "2", "3", "4", "5")
"""Other hash seeds the maps are computed under, to find the orders that depend on it."""


def _zoo():
    spec = importlib.util.spec_from_file_location("device_map_zoo", HERE / "device_map_zoo.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _run(function, *args, **kwargs) -> dict:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = function(*args, **kwargs)
        except Exception as exc:  # recorded: accel must fail the same way
            return {"error": type(exc).__name__}
    messages = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
    return {"result": result, "buffer_warning": any("offload_buffers" in m for m in messages)}


def _orders(maps: list[dict], balanced: list[dict]) -> list[list | None]:
    return [entry.get("device_map") for entry in maps + balanced]


def _mark_hash_dependent_orders(maps: list[dict], balanced: list[dict]) -> None:
    """Run this script under :data:`ORDER_SEEDS`; mark the entries whose key order changes."""
    ours = _orders(maps, balanced)
    with tempfile.TemporaryDirectory() as folder:
        for seed in ORDER_SEEDS:
            path = Path(folder) / f"{seed}.json"
            env = {**os.environ, "PYTHONHASHSEED": seed}
            subprocess.run([sys.executable, __file__, "--orders", str(path)], env=env, check=True)
            for entry, mine, theirs in zip(maps + balanced, ours, json.loads(path.read_text())):
                if mine != theirs:
                    entry["order_depends_on_hash_seed"] = True


def main() -> None:
    orders_only = sys.argv[1:2] == ["--orders"]  # internal: write the key orders to argv[2]
    if not orders_only and os.environ.get("PYTHONHASHSEED") != "0":
        os.environ["PYTHONHASHSEED"] = "0"
        os.execv(sys.executable, [sys.executable, *sys.argv])
    import accelerate

    if accelerate.Accelerator.__module__.startswith("accel."):
        raise SystemExit(
            "this environment's accelerate is accel's compat distribution: run through "
            "tools/bench/accelerate_env.py to use the real Accelerate"
        )
    from accelerate.utils import get_balanced_memory, infer_auto_device_map

    zoo = _zoo()
    maps = []
    for name, index, budget, options in zoo.cases():
        model = zoo.build(name)
        run = _run(infer_auto_device_map, model, max_memory=dict(budget), **options)
        entry = {"model": name, "budget": index, "options": options}
        if "error" in run:
            entry["error"] = run["error"]
        else:
            entry["device_map"] = [[k, v] for k, v in run["result"].items()]
            entry["buffer_warning"] = run["buffer_warning"]
        maps.append(entry)
    balanced = []
    for name, index, budget, options in zoo.balanced_cases():
        model = zoo.build(name)
        run = _run(get_balanced_memory, model, max_memory=dict(budget), **options)
        entry = {"model": name, "budget": index, "options": options}
        if "error" in run:
            entry["error"] = run["error"]
        else:
            entry["max_memory"] = zoo.encode_budget({k: int(v) for k, v in run["result"].items()})
            no_split = options.get("no_split_module_classes")
            planned = _run(
                infer_auto_device_map,
                model,
                max_memory=dict(run["result"]),
                no_split_module_classes=no_split,
                dtype=options.get("dtype"),
            )
            entry["device_map"] = [[k, v] for k, v in planned["result"].items()]
        balanced.append(entry)
    if orders_only:
        Path(sys.argv[2]).write_text(json.dumps(_orders(maps, balanced)))
        return
    _mark_hash_dependent_orders(maps, balanced)
    budgets = {
        name: [zoo.encode_budget(b) for b in zoo.budgets(zoo.build(name))] for name in zoo.MODELS
    }
    data = {
        "accelerate": accelerate.__version__,
        "generator": "tools/gen_device_map_reference.py",
        "budgets": budgets,
        "infer_auto_device_map": maps,
        "get_balanced_memory": balanced,
    }
    OUTPUT.write_text(json.dumps(data, indent=1) + "\n")
    print(f"{len(maps)} maps and {len(balanced)} balanced budgets written to {OUTPUT}")


if __name__ == "__main__":
    main()
