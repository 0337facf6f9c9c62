"""``TrackerConformance``: a tracker logs scalars and config, ends cleanly, and only rank 0 creates a run."""

from __future__ import annotations

import math
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import pytest

from .processes import WORKERS, clean_environment, run_command, torchrun_command
from .workers import tracker_worker as spec


class TrackerConformance:
    """Subclass in your plugin's tests (``Test...``); set :attr:`tracker_names` and implement :meth:`read_runs`.

    One job of 2 real processes (torchrun, gloo) runs every name in :attr:`tracker_names`
    in turn (see ``accel/testing/workers/tracker_worker.py``), each in its own directory
    with a fresh ``HOME``; the tests, one per name, then read back what the tracker's own
    library wrote. Setting :attr:`tracker_names` on a subclass parametrises the tests by name.
    """

    tracker_names: ClassVar[tuple[str, ...]] = ()
    """The ``log_with=`` names to check (one test of each check per name)."""
    timeout: ClassVar[float] = 300
    """Seconds the whole job may take."""
    cleared_prefixes: ClassVar[tuple[str, ...]] = ()
    """Environment variables removed for the job (``("WANDB_",)``: nothing points at a server)."""
    atol: ClassVar[float] = 1e-6
    """Tolerance on the read-back scalars (trackers may store float32)."""

    PROJECT: ClassVar[str] = spec.PROJECT
    """The project / run name the worker passes to ``init_trackers``."""
    CONFIG: ClassVar[Mapping[str, object]] = spec.CONFIG
    """The configuration the worker passes to ``init_trackers``."""
    STEPS: ClassVar[list[int]] = spec.STEPS
    """The steps the worker logs."""

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "tracker_names" in cls.__dict__:
            names = list(cls.tracker_names)

            @pytest.fixture(params=names, ids=names)
            def tracker_name(self, request) -> str:
                """One of :attr:`tracker_names`."""
                return request.param

            cls.tracker_name = tracker_name  # type: ignore[attr-defined]

    # -- what a plugin provides ---------------------------------------------
    def read_runs(self, name: str, directory: Path, home: Path) -> list[dict[str, Any]]:
        """Every run tracker ``name`` created, read back through its library.

        ``directory`` is the run's ``project_dir`` and working directory, ``home`` the
        ``HOME`` of the job. Return one dict per run found: ``{"config": {...},
        "scalars": {key: {step: value}}}``. The kit asserts there is exactly one.
        """
        raise NotImplementedError(
            f"{type(self).__name__}.read_runs must read back what the {name!r} tracker wrote"
        )

    def tracker_env(self, home: Path) -> dict[str, str]:
        """Environment of the job: a fresh ``HOME`` (trackers run offline); extend for your library."""
        home.mkdir(parents=True, exist_ok=True)
        return {
            "HOME": str(home),
            "XDG_CACHE_HOME": str(home / ".cache"),
            "XDG_CONFIG_HOME": str(home / ".config"),
        }

    # -- the job --------------------------------------------------------------
    @pytest.fixture(scope="class")
    @classmethod
    def tracker_job(cls, tmp_path_factory) -> Path:
        """Run the 2-process job once for every name; the folder holding one directory per name."""
        if not cls.tracker_names:
            pytest.skip("no tracker_names to check")
        root = tmp_path_factory.mktemp(f"trackers-{cls.__name__}")
        out = root / "out"
        env = {
            k: v for k, v in clean_environment().items() if not k.startswith(cls.cleared_prefixes)
        }
        env.update(cls().tracker_env(root / "home"))
        # a copy outside any git checkout: some trackers (ClearML) analyse the script's repository
        script = root / "tracker_worker.py"
        shutil.copy(WORKERS / "tracker_worker.py", script)
        command = torchrun_command(script, [str(out), *cls.tracker_names], 2)
        run_command(command, env=env, timeout=cls.timeout)
        return out

    # -- checks -----------------------------------------------------------------
    def test_tracker_is_registered(self, tracker_name):
        """The registry resolves the name to a GeneralTracker subclass of that ``name``."""
        from accel.plugins import registry
        from accel.tracking import GeneralTracker

        cls = registry.get_tracker(tracker_name)
        assert isinstance(cls, type) and issubclass(cls, GeneralTracker), cls
        assert cls.name == tracker_name, (cls.name, tracker_name)
        assert cls.is_available(), f"{cls.__name__}.is_available() is False here"

    def test_only_the_main_process_tracks(self, tracker_job, tracker_name):
        """Both ranks finished; rank 0 held the tracker, rank 1 a no-op."""
        import json

        directory = tracker_job / tracker_name
        ranks = [json.loads((directory / f"rank{r}.json").read_text()) for r in (0, 1)]
        assert ranks[0]["trackers"] == [tracker_name], ranks[0]
        assert ranks[1]["trackers"] == [], ranks[1]
        runs = self.read_runs(tracker_name, directory, tracker_job.parent / "home")
        assert len(runs) == 1, f"{len(runs)} runs were created, expected one (by rank 0)"

    def test_scalars_and_config_are_logged(self, tracker_job, tracker_name):
        """``metric`` and the tensor ``loss`` at every step, and the configuration, read back."""
        runs = self.read_runs(tracker_name, tracker_job / tracker_name, tracker_job.parent / "home")
        assert runs, "no run was found"
        run = runs[0]
        for key, values in (
            ("metric", [spec.metric(s) for s in self.STEPS]),
            ("loss", [spec.loss(s) for s in self.STEPS]),
        ):
            got = run["scalars"].get(key, {})
            assert sorted(got) == self.STEPS, f"{key} logged at steps {sorted(got)}"
            for step, want in zip(self.STEPS, values):
                assert math.isclose(float(got[step]), want, abs_tol=self.atol, rel_tol=1e-6), (
                    key,
                    step,
                    got[step],
                    want,
                )
        config = run["config"]
        for key, want in self.CONFIG.items():
            assert key in config, f"config key {key!r} missing: {config}"
            got = config[key]
            if isinstance(want, int | float) and not isinstance(got, int | float):
                got = float(got)
            assert got == want, (key, got, want)
