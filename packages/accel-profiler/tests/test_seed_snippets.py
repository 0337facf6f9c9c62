"""Every snippet of the user guide's profiler section ("分析器"), run on the CPU.

Each test holds the seed's code after ``s/accelerate/accel/``; where the seed moves tensors
with ``.cuda()``, the test uses ``device`` (the CPU here). Each accel snippet is checked
against what the plain-PyTorch snippet beside it produces.
"""

from __future__ import annotations

import json
import warnings

import pytest
import torch
from accel import Accelerator, ProfileKwargs
from torch.profiler import ProfilerActivity, profile, record_function, schedule

pytestmark = pytest.mark.timeout(300)

HAS_CUDA = torch.cuda.is_available()
device = "cuda" if HAS_CUDA else "cpu"


def _names(prof) -> set[str]:
    return {event.key for event in prof.key_averages()}


def _cuda_dropped(caught) -> bool:
    return any("['cuda']" in str(w.message) and "not available" in str(w.message) for w in caught)


# -- 1. execution time ----------------------------------------------------------
def test_execution_time_pytorch(models):
    model = models.resnet18()
    inputs = torch.randn(5, 3, 224, 224)

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        model(inputs)

    table = prof.key_averages().table(sort_by="cpu_time_total", row_limit=10)
    assert "aten::conv2d" in table and "CPU total" in table


def test_execution_time_accel(models):
    model = models.resnet18()
    inputs = torch.randn(5, 3, 224, 224)

    profile_kwargs = ProfileKwargs(activities=["cpu"], record_shapes=True)

    accelerator = Accelerator(cpu=True, kwargs_handlers=[profile_kwargs])
    model = accelerator.prepare(model)

    with accelerator.profile() as prof:
        with torch.no_grad():
            model(inputs)

    table = prof.key_averages().table(sort_by="cpu_time_total", row_limit=10)
    print(table)
    assert isinstance(prof, torch.profiler.profile)
    assert {"aten::conv2d", "aten::batch_norm", "aten::max_pool2d"} <= _names(prof)
    assert "Self CPU time total" in table

    # group_by_input_shape=True: a finer report, with the recorded input shapes
    detailed = prof.key_averages(group_by_input_shape=True).table(
        sort_by="cpu_time_total", row_limit=10
    )
    print(detailed)
    assert "Input Shapes" in detailed
    shapes = [e.input_shapes for e in prof.key_averages(group_by_input_shape=True)]
    assert [5, 3, 224, 224] in [s[0] for s in shapes if s], shapes


# -- 2. memory ------------------------------------------------------------------
def test_memory_pytorch(models):
    model = models.resnet18()
    inputs = torch.randn(5, 3, 224, 224)

    with profile(
        activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True
    ) as prof:
        model(inputs)

    assert "CPU Mem" in prof.key_averages().table(sort_by="self_cpu_memory_usage", row_limit=10)


def test_memory_accel(models):
    model = models.resnet18()
    inputs = torch.randn(5, 3, 224, 224)

    profile_kwargs = ProfileKwargs(activities=["cpu"], profile_memory=True, record_shapes=True)

    accelerator = Accelerator(cpu=True, kwargs_handlers=[profile_kwargs])
    model = accelerator.prepare(model)

    with accelerator.profile() as prof:
        model(inputs)

    table = prof.key_averages().table(sort_by="self_cpu_memory_usage", row_limit=10)
    print(table)
    assert "CPU Mem" in table and "Self CPU Mem" in table
    allocated = {e.key: e.self_cpu_memory_usage for e in prof.key_averages()}
    assert max(allocated.values()) > 0, allocated


# -- 3. Chrome trace ------------------------------------------------------------
def test_chrome_trace_pytorch(models, tmp_path):
    model = models.resnet18().to(device)
    inputs = torch.randn(5, 3, 224, 224).to(device)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if HAS_CUDA else [])

    with profile(activities=activities) as prof:
        model(inputs)

    prof.export_chrome_trace(str(tmp_path / "trace.json"))
    assert json.loads((tmp_path / "trace.json").read_text())["traceEvents"]


def test_chrome_trace_accel(models, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = models.resnet18()
    inputs = torch.randn(5, 3, 224, 224).to(device)
    profile_kwargs = ProfileKwargs(activities=["cpu", "cuda"], output_trace_dir="trace")

    accelerator = Accelerator(kwargs_handlers=[profile_kwargs])
    model = accelerator.prepare(model)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with accelerator.profile() as prof:
            model(inputs)
    assert _cuda_dropped(caught) is not HAS_CUDA, [str(w.message) for w in caught]

    # The trace will be saved to the specified directory
    assert prof is not None
    trace = json.loads((tmp_path / "trace" / "profile_0.json").read_text())
    names = {event.get("name") for event in trace["traceEvents"]}
    assert "aten::conv2d" in names


# -- 4. long-running jobs ---------------------------------------------------------
def _seed_schedule_run(model, inputs, iterations, tmp_path):
    """The seed's accel snippet (trace files go to ``tmp_path`` instead of /tmp)."""
    ready_steps = []

    def trace_handler(p):
        output = p.key_averages().table(sort_by="self_cuda_time_total", row_limit=10)
        print(output)
        p.export_chrome_trace(str(tmp_path / f"trace_{p.step_num}.json"))
        ready_steps.append(p.step_num)

    profile_kwargs = ProfileKwargs(
        activities=["cpu", "cuda"],
        schedule_option={"wait": 5, "warmup": 1, "active": 3, "repeat": 2, "skip_first": 1},
        on_trace_ready=trace_handler,
    )

    accelerator = Accelerator(kwargs_handlers=[profile_kwargs])
    model = accelerator.prepare(model)

    with accelerator.profile() as prof:
        for _idx in range(iterations):
            model(inputs)
            prof.step()
    return ready_steps


def test_long_running_pytorch(models, tmp_path):
    model = models.resnet18()
    inputs = torch.randn(5, 3, 224, 224)
    my_schedule = schedule(skip_first=1, wait=5, warmup=1, active=3, repeat=2)
    ready = []

    def trace_handler(p):
        p.export_chrome_trace(str(tmp_path / f"trace_{p.step_num}.json"))
        ready.append(p.step_num)

    with profile(
        activities=[ProfilerActivity.CPU], schedule=my_schedule, on_trace_ready=trace_handler
    ) as p:
        for _idx in range(8):
            model(inputs)
            p.step()
    assert ready == [8]


def test_long_running_accel_seed_loop(models, tmp_path):
    """The seed's 8 iterations: step 0 skipped, 1-5 wait, 6 warm-up, 7-8 active -> one trace at exit."""
    model = models.resnet18()
    inputs = torch.randn(5, 3, 224, 224)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ready = _seed_schedule_run(model, inputs, 8, tmp_path)
    assert ready == [8]
    assert json.loads((tmp_path / "trace_8.json").read_text())["traceEvents"]


def test_long_running_accel_two_cycles(models, tmp_path):
    """20 iterations cover both cycles of repeat=2: the handler runs exactly twice."""
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    inputs = torch.randn(5, 16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ready = _seed_schedule_run(model, inputs, 20, tmp_path)
    assert ready == [10, 19]
    assert sorted(p.name for p in tmp_path.glob("trace_*.json")) == [
        "trace_10.json",
        "trace_19.json",
    ]


def test_scheduled_traces_go_to_output_trace_dir(tmp_path):
    model = torch.nn.Linear(8, 8)
    calls = []
    kwargs = ProfileKwargs(
        activities=["cpu"],
        schedule_option={"wait": 1, "warmup": 1, "active": 2, "repeat": 2},
        on_trace_ready=lambda p: calls.append(p.step_num),
        output_trace_dir=tmp_path / "traces",
    )
    accelerator = Accelerator(cpu=True)
    with accelerator.profile(kwargs) as prof:
        for _ in range(10):
            with record_function("my_step"):
                model(torch.randn(2, 8))
            prof.step()
    assert calls == [4, 8]
    files = sorted(p.name for p in (tmp_path / "traces").iterdir())
    assert files == ["profile_0_step4.json", "profile_0_step8.json"]
    for name in files:
        events = json.loads((tmp_path / "traces" / name).read_text())["traceEvents"]
        assert "my_step" in {e.get("name") for e in events}


# -- 5. FLOPs ---------------------------------------------------------------------
def test_flops_pytorch(models):
    model = models.resnet18()
    inputs = torch.randn(5, 3, 224, 224)

    with profile(activities=[ProfilerActivity.CPU], with_flops=True) as prof:
        model(inputs)

    assert "FLOPs" in prof.key_averages().table(sort_by="flops", row_limit=10)


def test_flops_accel(models):
    model = models.resnet18()
    inputs = torch.randn(5, 3, 224, 224)

    profile_kwargs = ProfileKwargs(with_flops=True)
    accelerator = Accelerator(kwargs_handlers=[profile_kwargs])

    with accelerator.profile() as prof:
        model(inputs)

    table = prof.key_averages().table(sort_by="flops", row_limit=10)
    print(table)
    assert "FLOPs" in table
    flops = {e.key: e.flops for e in prof.key_averages() if e.flops}
    assert flops.get("aten::conv2d", 0) > 0 and flops.get("aten::addmm", 0) > 0, flops
    assert list(flops)[0] in table
