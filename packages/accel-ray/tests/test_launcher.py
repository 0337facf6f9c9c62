"""The ``ray_config`` section, the Ray launcher's plan and the driver's failure records (no Ray run)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest
from accel.errors import ConfigError, UsageError
from accel.launchers import plan_launch
from accel_ray.config import RAY_SECTION, read_resources, read_runtime_env
from accel_ray.launcher import DRIVER_MODULE, WORKER_ENV, RayLauncher, check_reachable


def test_resources_from_text_json_and_mapping():
    assert read_resources("CPU=2, GPU=1", "x") == {"CPU": 2.0, "GPU": 1.0}
    assert read_resources('{"CPU": 1, "custom": 0.5}', "x") == {"CPU": 1.0, "custom": 0.5}
    assert read_resources({"CPU": "3"}, "x") == {"CPU": 3.0}
    for bad, words in [("CPU", "NAME=AMOUNT"), ("CPU=two", "not a number"), ("CPU=-1", "negative")]:
        with pytest.raises(ConfigError, match=words):
            read_resources(bad, "ray_config.ray_resources_per_worker")


def test_runtime_env_from_json_and_files(tmp_path):
    assert read_runtime_env('{"env_vars": {"A": "1"}}', "x") == {"env_vars": {"A": "1"}}
    (tmp_path / "env.yaml").write_text("working_dir: .\nenv_vars:\n  A: '1'\n")
    assert read_runtime_env(str(tmp_path / "env.yaml"), "x") == {
        "working_dir": ".",
        "env_vars": {"A": "1"},
    }
    with pytest.raises(ConfigError, match="neither JSON nor an existing"):
        read_runtime_env("missing.yaml", "x")
    with pytest.raises(ConfigError, match="not valid JSON"):
        read_runtime_env("{bad", "x")


def test_section_defaults_and_validation():
    values = RAY_SECTION.read({})
    assert values["use_ray"] is False and values["ray_max_failures"] == 0
    assert values["ray_report_checkpoints"] is True and values["ray_num_to_keep"] is None
    assert RAY_SECTION.validate({"ray_num_workers": 0})  # below the minimum
    assert RAY_SECTION.validate({"ray_num_to_keep": 0})
    assert RAY_SECTION.validate({"ray_adress": "x"})  # unknown key


def _settings(**ray: object) -> dict:
    return {
        "compute_environment": "LOCAL_MACHINE",
        "distributed_type": "MULTI_CPU",
        "num_processes": 2,
        "use_cpu": True,
        "ray_config": {"use_ray": True, **ray},
    }


def test_plan_runs_the_driver_with_the_workers_environment():
    with socket.socket() as server:  # a "cluster" that accepts connections
        server.bind(("127.0.0.1", 0))
        server.listen()
        address = f"127.0.0.1:{server.getsockname()[1]}"
        plan = plan_launch(_settings(ray_address=address), ["train.py", "--lr", "1"])
    assert plan.launcher == "ray"
    assert plan.argv == [sys.executable, "-m", DRIVER_MODULE, "--script", "train.py", "--lr", "1"]
    assert (plan.num_processes, plan.machine_rank) == (2, None)
    assert address in plan.where
    workers = json.loads(plan.environment[WORKER_ENV])
    assert workers["ACCEL_USE_CPU"] == "true" and "ACCEL_LAUNCH_CONFIG" in workers
    assert WORKER_ENV not in workers
    assert plan_launch(_settings(ray_num_workers=3), ["t.py"]).num_processes == 3
    module = plan_launch(_settings(), ["pkg.train"], module=True)
    assert module.argv[-2:] == ["--module", "pkg.train"]


def test_unreachable_address_is_a_usage_error(monkeypatch):
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # bound, never listening: connections are refused
        for address in (f"127.0.0.1:{port}", f"ray://127.0.0.1:{port}"):
            with pytest.raises(UsageError, match=f"{address}: no Ray cluster answers there"):
                plan_launch(_settings(ray_address=address), ["t.py"])
        monkeypatch.setenv("RAY_ADDRESS", f"127.0.0.1:{port}")
        with pytest.raises(UsageError, match=f"^RAY_ADDRESS 127.0.0.1:{port}: no Ray cluster"):
            plan_launch(_settings(), ["t.py"])
    monkeypatch.delenv("RAY_ADDRESS")
    plan_launch(_settings(ray_address="auto"), ["t.py"])  # left to Ray


def test_ray_client_address_without_port_is_probed_on_10001(monkeypatch):
    probed = []

    def connect(where, timeout):
        probed.append(where)
        raise ConnectionRefusedError(111, "Connection refused")

    monkeypatch.setattr(socket, "create_connection", connect)
    with pytest.raises(UsageError, match="ray://127.0.0.1: no Ray cluster answers there"):
        check_reachable("ray://127.0.0.1")
    check_reachable("auto")
    assert probed == [("127.0.0.1", 10001)]


def test_plan_refuses_no_python_max_restarts_and_is_not_chosen_without_ray():
    with pytest.raises(UsageError, match="drop --no_python"):
        plan_launch(_settings(), ["prog"], no_python=True)
    with pytest.raises(UsageError, match="use --ray_max_failures"):
        plan_launch({**_settings(), "max_restarts": 2}, ["t.py"])
    with pytest.raises(UsageError, match="drop --num_machines"):
        plan_launch({**_settings(), "num_machines": 2, "main_process_ip": "h"}, ["t.py"])
    settings = _settings()
    settings["ray_config"] = {}
    assert not RayLauncher().claims(settings)
    assert plan_launch(settings, ["t.py"]).launcher != "ray"


def test_registration_imports_neither_ray_nor_torch():
    code = (
        "import sys, accel_ray, accel_ray.plugin, accel_ray.launcher, accel_ray.config\n"
        "from accel.plugins import registry\n"
        "assert 'ray' in registry.launchers()\n"
        "heavy = [m for m in ('ray', 'torch') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_failure_records_name_each_failing_rank():
    pytest.importorskip("ray.train", reason="Ray (ray[train]) is not installed")
    from accel_ray.driver import failure_records
    from accel_ray.worker import ScriptFailed
    from ray.train import WorkerGroupError

    record = {
        "rank": 1,
        "local_rank": 0,
        "group_rank": 1,
        "restart": 0,
        "time": 2.0,
        "exit_code": 1,
        "error": "ValueError: no",
        "traceback": "Traceback ...",
    }
    error = WorkerGroupError(
        "two failed", {1: ScriptFailed(json.dumps(record)), 0: RuntimeError("actor died\nmore")}
    )
    records = failure_records(error)
    assert records[1] == record
    assert records[0]["rank"] == 0 and records[0]["error"] == "RuntimeError: actor died"


def test_num_workers_is_a_number_or_an_elastic_range():
    from accel_ray.config import read_num_workers

    assert read_num_workers("3", "x") == 3 and read_num_workers(2, "x") == 2
    assert read_num_workers("1:4", "x") == (1, 4) and read_num_workers([2, 8], "x") == (2, 8)
    assert read_num_workers(" 2 : 2 ", "x") == 2  # a range of one size is that size
    for bad, words in [
        ("0", "at least 1 worker"),
        ("0:2", "at least 1 worker"),
        ("4:2", "MIN 4 is larger than MAX 2"),
        ("1:", "N or an elastic range MIN:MAX"),
        ("1:2:3", "N or an elastic range MIN:MAX"),
        ("two", "N or an elastic range MIN:MAX"),
        (True, "N or an elastic range MIN:MAX"),
    ]:
        with pytest.raises(ConfigError, match=words):
            read_num_workers(bad, "ray_config.ray_num_workers")
    assert RAY_SECTION.read({"ray_num_workers": "1:2"})["ray_num_workers"] == (1, 2)
    assert RAY_SECTION.validate({"ray_num_workers": "2:1"})
    assert RAY_SECTION.validate({"ray_resize_interval": -1})


def test_elastic_plan_and_scaling_config():
    from accel_ray.driver import scaling_options

    plan = plan_launch(_settings(ray_num_workers="1:4"), ["t.py"])
    assert (plan.num_processes, plan.nproc_per_node) == (4, 4)
    assert "1 to 4 Ray Train workers (elastic)" in plan.where
    # each worker's state tells its distributed type from its group (1 worker: NO, 2+: MULTI_CPU)
    workers = json.loads(plan.environment[WORKER_ENV])
    assert "ACCEL_DISTRIBUTED_TYPE" not in workers and "ACCEL_USE_CPU" in workers
    fixed = json.loads(plan_launch(_settings(), ["t.py"]).environment[WORKER_ENV])
    assert fixed["ACCEL_DISTRIBUTED_TYPE"] == "MULTI_CPU"  # as many workers as num_processes
    other = _settings(ray_num_workers=3)
    assert "ACCEL_DISTRIBUTED_TYPE" not in json.loads(
        plan_launch(other, ["t.py"]).environment[WORKER_ENV]
    )

    elastic = _settings(
        ray_num_workers="1:4", ray_resize_interval=5, ray_resources_per_worker="CPU=2"
    )
    assert scaling_options(elastic) == {
        "num_workers": (1, 4),
        "use_gpu": False,
        "resources_per_worker": {"CPU": 2.0},
        "elastic_resize_monitor_interval_s": 5.0,
    }
    assert scaling_options(_settings(ray_resize_interval=5))["num_workers"] == 2
    assert "elastic_resize_monitor_interval_s" not in scaling_options(
        _settings(ray_resize_interval=5)
    )
