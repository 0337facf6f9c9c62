"""``LauncherConformance``: a launcher's :class:`~accel.launchers.LaunchPlan` really starts the processes it says."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, ClassVar

import pytest

from .processes import WORKERS, clean_environment, run_command


class LauncherConformance:
    """Subclass in your plugin's tests (``Test...``); set :attr:`launcher_name` and :attr:`settings`.

    The settings are resolved the way ``accel launch`` resolves them
    (:func:`accel.config.resolution.resolve`, no config file, no environment), planned with
    :func:`accel.launchers.plan_launch` for the kit's worker, and the plan's ``argv`` is run
    with its ``environment``. Each started process writes its rank and world size as
    accel's process state sees them; the set must be exactly the one the plan announced.
    """

    launcher_name: ClassVar[str] = ""
    """The name the launcher is registered under (``accel launch --launcher NAME``)."""
    settings: ClassVar[dict[str, object]] = {"num_processes": 2, "use_cpu": True}
    """``accel launch`` settings (``"section.key"`` names set a key of a plugin section)."""
    required_programs: ClassVar[tuple[str, ...]] = ()
    """Programs the launch needs (``("mpirun",)``): the run check is skipped without them."""
    claims_settings: ClassVar[bool] = True
    """Whether the launcher claims these settings on its own (without ``--launcher``)."""
    timeout: ClassVar[float] = 180
    """Seconds the launched job may take."""

    def make_settings(self, folder: Path) -> dict[str, object]:
        """The settings for a run in ``folder``; override to write files a launcher needs (host files)."""
        return dict(self.settings)

    def resolved(self, folder: Path) -> dict[str, Any]:
        """The resolved settings, as ``accel launch`` would hand them to the launcher."""
        from accel.config.resolution import resolve

        return dict(
            resolve(flags=self.make_settings(folder), use_config_file=False, environ={}).values
        )

    def skip_without_programs(self) -> None:
        """Skip the calling check when a program of :attr:`required_programs` is not on PATH."""
        missing = [p for p in self.required_programs if shutil.which(p) is None]
        if missing:
            pytest.skip(
                f"{', '.join(missing)} not found on PATH (needed to plan and run this launch)"
            )

    # -- checks -----------------------------------------------------------------
    def test_launcher_is_registered(self):
        """The registry lists a Launcher subclass under :attr:`launcher_name`."""
        from accel.launchers import Launcher
        from accel.plugins import registry

        assert self.launcher_name, "set launcher_name on the conformance class"
        table = registry.launchers()
        assert self.launcher_name in table, f"no launcher {self.launcher_name!r}: {sorted(table)}"
        cls = table[self.launcher_name]
        assert isinstance(cls, type) and issubclass(cls, Launcher), cls
        assert cls.name == self.launcher_name, (cls.name, self.launcher_name)

    def test_plan_is_chosen_for_its_settings(self, tmp_path):
        """Without ``--launcher`` the settings are planned by this launcher (when it claims them)."""
        from accel.launchers import LaunchPlan, plan_launch

        if not self.claims_settings:
            pytest.skip("this launcher is chosen by name only")
        self.skip_without_programs()
        plan = plan_launch(self.resolved(tmp_path), ["train.py", "--lr", "1"])
        assert isinstance(plan, LaunchPlan), plan
        assert plan.launcher == self.launcher_name, (
            f"the settings were planned by {plan.launcher!r}, not {self.launcher_name!r}"
        )
        assert plan.argv and all(isinstance(a, str) for a in plan.argv), plan.argv
        assert plan.script == ["train.py", "--lr", "1"], plan.script
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in plan.environment.items())

    def test_plan_starts_the_processes_it_says(self, tmp_path):
        """Run the plan: exactly ``plan.num_processes`` processes start, with ranks 0..n-1 of that world."""
        from accel.launchers import plan_launch

        self.skip_without_programs()
        out = tmp_path / "ranks"
        plan = plan_launch(
            self.resolved(tmp_path),
            [str(WORKERS / "launcher_worker.py"), str(out)],
            launcher=self.launcher_name,
        )
        assert plan.launcher == self.launcher_name, plan.launcher
        env = clean_environment(plan.environment)
        run_command(plan.argv, env=env, timeout=self.timeout, cwd=tmp_path)
        records = [json.loads(p.read_text()) for p in sorted(out.glob("*.json"))]
        assert len(records) == plan.num_processes, (
            f"the plan announced {plan.num_processes} processes, {len(records)} started: {records}"
        )
        assert sorted(r["rank"] for r in records) == list(range(plan.num_processes)), records
        assert {r["world_size"] for r in records} == {plan.num_processes}, records
        per_node = sorted(r["local_rank"] for r in records if r["rank"] < plan.nproc_per_node)
        assert per_node == list(range(plan.nproc_per_node)), records
        assert len({r["pid"] for r in records}) == plan.num_processes, "processes were reused"
