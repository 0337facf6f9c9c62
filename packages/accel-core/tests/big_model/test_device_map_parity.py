"""accel's ``infer_auto_device_map`` / ``get_balanced_memory`` give Accelerate's results.

The reference results were produced once by Accelerate itself
(``tools/gen_device_map_reference.py``, committed in ``accelerate_device_maps.json``) on the
models, budgets and options of ``device_map_zoo.py``: reserving room for the largest layer
on the first accelerator and the CPU, tied weights placed together, unsplittable classes,
buffers, ``fallback_allocation``, ``dtype``, ``clean_result=False``. No Accelerate needed here.
The maps are compared with their key order (transformers shows it as ``model.hf_device_map``)
except where Accelerate's order depends on the hash seed (``order_depends_on_hash_seed``).
"""

from __future__ import annotations

import importlib.util
import json
import warnings
from pathlib import Path

import pytest
from accel.utils import compute_module_sizes, get_balanced_memory, infer_auto_device_map
from accel.utils.device_map import check_device_map, device_for

HERE = Path(__file__).parent
REFERENCE = json.loads((HERE / "accelerate_device_maps.json").read_text())
_spec = importlib.util.spec_from_file_location("device_map_zoo", HERE / "device_map_zoo.py")
zoo = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(zoo)


def _budget(entry: dict) -> dict:
    return zoo.decode_budget(REFERENCE["budgets"][entry["model"]][entry["budget"]])


def _id(entry: dict) -> str:
    options = ",".join(f"{k}={v}" for k, v in entry["options"].items())
    return f"{entry['model']}-b{entry['budget']}-{options or 'defaults'}"


def _plan(model, budget, options) -> tuple[dict, bool]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        device_map = infer_auto_device_map(model, max_memory=dict(budget), **options)
    return device_map, any("offload_buffers" in str(w.message) for w in caught)


def _without_covered_buffers(model, ours: dict, theirs: dict) -> dict:
    """Our map less the entries accel adds for buffers Accelerate's map leaves uncovered."""
    buffers = {name for name, _ in model.named_buffers()}
    extra = {k: v for k, v in ours.items() if k not in theirs and k in buffers}
    for name in extra:
        with pytest.raises(KeyError):
            device_for(name, theirs)
    return {k: v for k, v in ours.items() if k not in extra}


def _same_map(ours: dict, entry: dict) -> None:
    theirs = [tuple(item) for item in entry["device_map"]]
    if entry.get("order_depends_on_hash_seed"):
        assert ours == dict(theirs)
    else:
        assert list(ours.items()) == theirs


def _build(entry: dict):
    if entry["model"] == "gpt2":
        pytest.importorskip("transformers")
    return zoo.build(entry["model"])


def test_the_reference_covers_the_zoo():
    assert len(REFERENCE["infer_auto_device_map"]) == len(list(zoo.cases()))
    assert len(REFERENCE["get_balanced_memory"]) == len(list(zoo.balanced_cases()))
    for name in zoo.MODELS:
        if name == "gpt2" and importlib.util.find_spec("transformers") is None:
            continue
        assert [zoo.encode_budget(b) for b in zoo.budgets(zoo.build(name))] == REFERENCE["budgets"][
            name
        ], "device_map_zoo.py changed: rerun tools/gen_device_map_reference.py"


@pytest.mark.parametrize("entry", REFERENCE["infer_auto_device_map"], ids=_id)
def test_infer_auto_device_map_matches_accelerate(entry):
    model = _build(entry)
    budget = _budget(entry)
    ours, warned = _plan(model, budget, entry["options"])
    if "error" in entry:
        # Accelerate fails on these (fallback_allocation with tied weights or bool buffers);
        # accel gives a map that covers the model and keeps to the accelerators' budgets
        check_device_map(model, ours)
        sizes = compute_module_sizes(model, dtype=entry["options"].get("dtype"))
        for device, limit in budget.items():
            if device not in ("cpu", "disk"):
                assert sum(sizes[k] for k, d in ours.items() if d == device) <= limit, ours
        return
    _same_map(_without_covered_buffers(model, ours, dict(entry["device_map"])), entry)
    assert warned == entry["buffer_warning"]
    if entry["options"].get("clean_result", True):
        check_device_map(model, ours)


@pytest.mark.parametrize("entry", REFERENCE["get_balanced_memory"], ids=_id)
def test_get_balanced_memory_matches_accelerate(entry):
    model = _build(entry)
    options = entry["options"]
    budget = _budget(entry)
    balanced = get_balanced_memory(model, max_memory=dict(budget), **options)
    if "error" in entry:  # Accelerate fails on a budget naming "disk"; accel leaves it as is
        assert "disk" in budget and balanced["disk"] == budget["disk"]
        assert balanced["cpu"] == budget["cpu"]
        return
    assert balanced == zoo.decode_budget(entry["max_memory"])
    ours, _ = _plan(
        model,
        balanced,
        {
            "no_split_module_classes": options.get("no_split_module_classes"),
            "dtype": options.get("dtype"),
        },
    )
    _same_map(_without_covered_buffers(model, ours, dict(entry["device_map"])), entry)
