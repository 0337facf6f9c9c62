"""ProfileKwargs validation, activity selection, the plugin wiring and the error without the plugin."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import pytest
import torch
from accel import Accelerator, ProfileKwargs
from accel.errors import MissingPluginError
from accel.plugins import list_plugins, reset_plugin_manager
from accel_profiler import ProfilerConfigError

pytestmark = pytest.mark.timeout(120)


@pytest.mark.filterwarnings("ignore:Profiler won't be using warmup")
def test_every_field_is_accepted_and_reaches_torch(tmp_path):
    def handler(prof):
        handler.calls += 1

    handler.calls = 0
    kwargs = ProfileKwargs(
        activities=["cpu"],
        schedule_option={"wait": 0, "warmup": 0, "active": 1, "repeat": 1, "skip_first": 0},
        on_trace_ready=handler,
        record_shapes=True,
        profile_memory=True,
        with_stack=True,
        with_flops=True,
        with_modules=True,
        output_trace_dir=str(tmp_path),
    )
    assert set(kwargs.to_kwargs()) == {
        "activities",
        "schedule_option",
        "on_trace_ready",
        "record_shapes",
        "profile_memory",
        "with_stack",
        "with_flops",
        "with_modules",
        "output_trace_dir",
    }
    prof = kwargs.build()
    assert isinstance(prof, torch.profiler.profile)
    assert prof.activities == {torch.profiler.ProfilerActivity.CPU}
    assert prof.record_shapes and prof.profile_memory and prof.with_stack
    assert prof.with_flops and prof.with_modules
    assert prof.on_trace_ready is handler
    assert prof.schedule(0) == torch.profiler.ProfilerAction.RECORD_AND_SAVE


def test_defaults_profile_the_cpu_and_present_accelerators():
    activities = ProfileKwargs().profiler_activities()
    assert torch.profiler.ProfilerActivity.CPU in activities
    assert (torch.profiler.ProfilerActivity.CUDA in activities) == torch.cuda.is_available()


@pytest.mark.skipif(
    torch.cuda.is_available(), reason="checks dropping CUDA on a machine without it"
)
def test_missing_activities_are_dropped_with_a_warning():
    with pytest.warns(UserWarning, match=r"\['cuda', 'xpu'\] are not available"):
        activities = ProfileKwargs(activities=["cpu", "cuda", "xpu"]).profiler_activities()
    assert activities == [torch.profiler.ProfilerActivity.CPU]


@pytest.mark.skipif(
    torch.cuda.is_available(), reason="checks dropping CUDA on a machine without it"
)
def test_when_every_activity_is_missing_the_cpu_is_profiled_and_the_warning_points_at_the_user():
    with pytest.warns(
        UserWarning, match=r"\['cuda'\] are not available.*profiling \['cpu'\]"
    ) as caught:
        with Accelerator(cpu=True).profile(ProfileKwargs(activities=["cuda"])) as prof:
            torch.ones(2).sum()
    assert prof.activities == {torch.profiler.ProfilerActivity.CPU}
    assert caught[0].filename == __file__


def test_activities_accept_enum_members_and_upper_case():
    kwargs = ProfileKwargs(activities=[torch.profiler.ProfilerActivity.CPU, "CPU"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert kwargs.profiler_activities() == [torch.profiler.ProfilerActivity.CPU]


def test_unknown_activity_is_a_clear_error():
    with pytest.raises(ProfilerConfigError, match=r"unknown activity 'gpu'.*'cpu'"):
        ProfileKwargs(activities=["cpu", "gpu"])


def test_bad_schedule_option_key_is_a_clear_error():
    with pytest.raises(ProfilerConfigError) as info:
        ProfileKwargs(schedule_option={"wait": 1, "warmup": 1, "active": 2, "repeats": 2})
    message = str(info.value)
    assert "unknown key(s) ['repeats']" in message
    assert "allowed keys: ['wait', 'warmup', 'active', 'repeat', 'skip_first'" in message
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    "option, fragment",
    [
        ({"wait": 1, "active": 2}, "missing key(s) ['warmup']"),
        ({"wait": 1, "warmup": 1, "active": 0}, "'active' must be >= 1"),
        ({"wait": -1, "warmup": 1, "active": 1}, "'wait' must be an integer >= 0"),
        ({"wait": 1.5, "warmup": 1, "active": 1}, "'wait' must be an integer >= 0"),
        ([1, 1, 1], "expected a dict"),
    ],
)
def test_bad_schedule_option_values(option, fragment):
    with pytest.raises(ProfilerConfigError) as info:
        ProfileKwargs(schedule_option=option)
    assert fragment in str(info.value)


def test_bad_schedule_option_set_after_construction_fails_before_profiling():
    kwargs = ProfileKwargs()
    kwargs.schedule_option = {"wait": 1, "warmup": 1, "active": 1, "every": 3}
    with pytest.raises(ProfilerConfigError, match="every"):
        with Accelerator(cpu=True).profile(kwargs):
            pass


def test_profile_handler_argument_overrides_kwargs_handlers(tmp_path):
    accelerator = Accelerator(
        cpu=True, kwargs_handlers=[ProfileKwargs(output_trace_dir=str(tmp_path / "a"))]
    )
    with accelerator.profile(ProfileKwargs(output_trace_dir=str(tmp_path / "b"))):
        torch.ones(3).sum()
    assert not (tmp_path / "a").exists()
    assert json.loads((tmp_path / "b" / "profile_0.json").read_text())["traceEvents"]


def test_without_output_dir_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with Accelerator(cpu=True).profile() as prof:
        torch.ones(3).sum()
    assert prof.key_averages()
    assert list(tmp_path.iterdir()) == []


def test_exception_in_block_propagates():
    with pytest.raises(KeyError):
        with Accelerator(cpu=True).profile():
            raise KeyError("boom")


def test_plugin_is_registered():
    info = {p.name: p for p in list_plugins()}["profiler"]
    assert info.distribution == "accel-profiler" and info.error is None
    assert "accel_profile" in info.hooks


def test_without_the_plugin_profile_names_the_package(monkeypatch):
    monkeypatch.setenv("ACCEL_DISABLE_PLUGINS", "profiler")
    reset_plugin_manager()
    try:
        with pytest.raises(MissingPluginError, match="pip install accel-profiler"):
            Accelerator(cpu=True).profile()
    finally:
        monkeypatch.delenv("ACCEL_DISABLE_PLUGINS")
        reset_plugin_manager()


def test_importing_the_plugin_does_not_import_torch():
    code = (
        "import sys, accel_profiler, accel_profiler.plugin, accel;"
        "accel.ProfileKwargs(activities=['cpu'], schedule_option={'wait': 0, 'warmup': 0, 'active': 1});"
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
