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
``model.hf_device_map``), but ``clean_device_map`` visits sibling modules through a set of
names, so where merged siblings move to the end their order depends on the hash seed: the
map is cleaned again with that set iterated forwards and backwards, and an entry whose
order changes gets ``"order_depends_on_hash_seed": true`` (the test compares it as a dict).
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HERE = REPO / "packages" / "accel-core" / "tests" / "big_model"
OUTPUT = HERE / "accelerate_device_maps.json"


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


def _order_depends_on_hash_seed(function, *args, **kwargs) -> bool:
    """Whether Accelerate's cleaning orders the map of ``function(*args, **kwargs)`` by set order."""
    from accelerate.utils import modeling

    raw = function(*args, **{**kwargs, "clean_result": False})
    orders = []
    for backwards in (False, True):

        def ordered(items, backwards=backwards):  # a "set" iterated in a known order
            unique = list(dict.fromkeys(items))
            return unique[::-1] if backwards else unique

        modeling.set = ordered  # read by clean_device_map before the builtin
        try:
            orders.append(list(modeling.clean_device_map(dict(raw)).items()))
        finally:
            del modeling.set
    return orders[0] != orders[1]


def main() -> None:
    if os.environ.get("PYTHONHASHSEED") != "0":
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
            if options.get("clean_result", True) and _order_depends_on_hash_seed(
                infer_auto_device_map, model, max_memory=dict(budget), **options
            ):
                entry["order_depends_on_hash_seed"] = True
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
            if _order_depends_on_hash_seed(
                infer_auto_device_map,
                model,
                max_memory=dict(run["result"]),
                no_split_module_classes=no_split,
                dtype=options.get("dtype"),
            ):
                entry["order_depends_on_hash_seed"] = True
        balanced.append(entry)
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
