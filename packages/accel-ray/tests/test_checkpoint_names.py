"""Ray checkpoint names and the reporting switch the driver hands its workers (no Ray cluster)."""

from __future__ import annotations

import json
from pathlib import Path

from accel_ray import checkpoints, driver
from accel_ray.launcher import WORKER_ENV


def test_a_name_reported_again_gets_a_new_ray_name(monkeypatch):
    monkeypatch.setattr(checkpoints, "_REPORTED", {})
    names = [
        checkpoints._ray_name(Path(p))
        for p in ("/p/checkpoint_0", "/p/checkpoint_1", "/p/fixed", "/p/fixed", "/p/fixed")
    ]
    assert names == ["checkpoint_0", "checkpoint_1", "fixed", "fixed-1", "fixed-2"]


def test_workers_get_the_reporting_switch_from_the_settings(monkeypatch):
    monkeypatch.setenv(WORKER_ENV, json.dumps({"ACCEL_USE_CPU": "true"}))
    on = driver.runtime_env({"ray_report_checkpoints": True})["env_vars"]
    assert on[checkpoints.REPORT_ENV] == "true" and on["ACCEL_USE_CPU"] == "true"
    off = driver.runtime_env({"ray_report_checkpoints": False, "ray_runtime_env": {"pip": []}})
    assert off["env_vars"][checkpoints.REPORT_ENV] == "false" and off["pip"] == []
    mine = {"env_vars": {checkpoints.REPORT_ENV: "true"}}
    user = driver.runtime_env({"ray_report_checkpoints": False, "ray_runtime_env": mine})
    assert user["env_vars"][checkpoints.REPORT_ENV] == "true"  # the user's own variable wins


def test_outside_a_ray_train_worker_nothing_is_reported(monkeypatch):
    monkeypatch.setenv(checkpoints.REPORT_ENV, "true")
    assert checkpoints.auto_report() is False
    monkeypatch.delenv(checkpoints.REPORT_ENV)
    assert checkpoints.auto_report() is False


def test_the_checkpoint_hooks_take_the_run_view_not_the_accelerator(tmp_path):
    """accel-ray registers against the ``run`` argument of core's hook specs and needs nothing
    but the view: outside a Ray Train worker, resuming copies nothing and saving reports nothing."""
    from accel.checkpoint.view import RunView
    from accel.plugins import hook, list_plugins

    ray = [p for p in list_plugins() if p.distribution == "accel-ray"]
    assert ray and all(p.error is None for p in ray), ray
    assert {"accel_checkpoint_saved", "accel_before_resume"} <= set(ray[0].hooks)
    barriers = []
    run = RunView(0, 1, 0, True, True, 3, str(tmp_path), lambda: barriers.append(1))
    hook().accel_before_resume(run=run, checkpoint_root=str(tmp_path))
    hook().accel_checkpoint_saved(run=run, path=str(tmp_path))
    assert checkpoints.restore_checkpoint(run, tmp_path) is None
    assert list(tmp_path.iterdir()) == [] and barriers == []
