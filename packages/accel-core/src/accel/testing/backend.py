"""``BackendConformance``: a backend trains like plain PyTorch on 1 and 2 real processes and resumes."""

from __future__ import annotations

import inspect
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import ClassVar, cast

import pytest
import torch

from accel.backends import Backend

from .processes import WORKERS, accel_executable, clean_environment, run_command, run_processes
from .reference import (
    TrainRun,
    differences,
    load_object,
    losses_match,
    make_model,
    train_reference,
)


class BackendConformance:
    """Subclass in your plugin's tests (name it ``Test...``) to check a backend on real processes.

    Set :attr:`backend_name` and how the workers select the backend (:attr:`env`,
    :attr:`config_file`, :attr:`accelerator_kwargs` or :attr:`accelerator_kwargs_factory`).
    The checks train :func:`~accel.testing.reference.make_model` with SGD (momentum) on
    :attr:`global_batch_size` samples a step, split across the ranks, and compare with the
    same training in plain PyTorch on one process. Gloo on the CPU; each launch has
    :attr:`timeout` seconds. The backend must read the run only through its
    :class:`~accel.backends.BackendContext` (the workers check it holds no Accelerator).
    """

    backend_name: ClassVar[str] = ""
    """``accelerator.backend.name`` the workers must see on the largest world size."""
    one_process_backend_name: ClassVar[str | None] = None
    """``backend.name`` expected on one process (default: :attr:`backend_name`)."""
    world_sizes: ClassVar[tuple[int, ...]] = (1, 2)
    """Process counts to train on; resume is checked on the largest."""
    env: ClassVar[dict[str, str]] = {}
    """Environment variables of the workers (e.g. ``{"ACCEL_BACKEND": "mine"}``)."""
    config_file: ClassVar[str | None] = None
    """YAML of an ``accel launch`` config file; when set the workers start through ``accel launch``."""
    accelerator_kwargs: ClassVar[dict[str, object]] = {}
    """JSON-able keyword arguments of ``Accelerator(...)`` in the workers."""
    accelerator_kwargs_factory: ClassVar[str | None] = None
    """``"module:function"`` or ``"/file.py:function"`` returning more kwargs (plugin objects)."""
    model_factory: ClassVar[str | None] = None
    """``"module:function"`` (``seed -> nn.Module``) replacing the default tiny model."""
    train_step: ClassVar[str | None] = None
    """``"module:function"`` with the signature of :func:`~accel.testing.reference.default_train_step`."""
    steps: ClassVar[int] = 4
    """Optimizer steps of a run."""
    save_at: ClassVar[int] = 2
    """The step after which ``save_state`` writes the checkpoint that the resume loads."""
    global_batch_size: ClassVar[int] = 8
    """Samples per optimizer step over all ranks."""
    atol: ClassVar[float] = 1e-5
    """Absolute tolerance against the reference."""
    rtol: ClassVar[float] = 1e-4
    """Relative tolerance against the reference."""
    resume_atol: ClassVar[float] = 1e-6
    """Absolute tolerance between a resumed run and the uninterrupted one."""
    timeout: ClassVar[float] = 240
    """Seconds each launch may take."""

    # -- running ------------------------------------------------------------
    def launch(self, folder: Path, phase: str, world_size: int) -> TrainRun:
        """Run the worker for ``phase`` on ``world_size`` processes; return what rank 0 saved."""
        folder.mkdir(parents=True, exist_ok=True)
        expected = self.backend_name
        if world_size == 1 and self.one_process_backend_name is not None:
            expected = self.one_process_backend_name
        out = folder / f"{phase}-{world_size}.pt"
        spec = {
            "phase": phase,
            "world_size": world_size,
            "backend_name": expected,
            "steps": self.steps,
            "save_at": self.save_at,
            "global_batch_size": self.global_batch_size,
            "checkpoint": str(folder / f"checkpoint-{world_size}"),
            "out": str(out),
            "accelerator_kwargs": self.accelerator_kwargs,
            "accelerator_kwargs_factory": self.accelerator_kwargs_factory,
            "model_factory": self.model_factory,
            "train_step": self.train_step,
        }
        spec_file = folder / f"{phase}-{world_size}.json"
        spec_file.write_text(json.dumps(spec), encoding="utf-8")
        config = None
        env = {"ACCEL_CONFIG_DIR": str(folder / "config"), **self.env}
        if self.config_file is not None:
            if accel_executable() is None:
                pytest.skip("config_file needs the `accel` command: pip install accel-cli")
            config = folder / "accel_config.yaml"
            config.write_text(self.config_file, encoding="utf-8")
        script = WORKERS / "backend_worker.py"
        if world_size == 1 and config is None:  # one process needs no launcher
            run_command(
                [sys.executable, str(script), str(spec_file)], clean_environment(env), self.timeout
            )
        else:
            run_processes(
                script, [str(spec_file)], world_size, env, self.timeout, config_file=config
            )
        assert out.exists(), f"rank 0 wrote no result ({out})"
        return torch.load(out, weights_only=True)

    def reference(self) -> TrainRun:
        """Plain PyTorch, one process, full global batches."""
        factory = (
            cast("Callable[[int], torch.nn.Module]", load_object(self.model_factory))
            if self.model_factory
            else make_model
        )
        return train_reference(self.steps, self.global_batch_size, factory)

    @pytest.fixture(scope="class")
    @classmethod
    def conformance_folder(cls, tmp_path_factory) -> Path:
        """One scratch folder per conformance class."""
        return tmp_path_factory.mktemp(f"backend-{cls.__name__}")

    @pytest.fixture(scope="class")
    @classmethod
    def largest_run(cls, conformance_folder) -> TrainRun:
        """The uninterrupted training run on the largest world size (it also writes the checkpoint)."""
        return cls().launch(conformance_folder, "train", max(cls.world_sizes))

    @pytest.fixture(scope="class")
    @classmethod
    def one_process_run(cls, conformance_folder, request) -> TrainRun:
        """The training run on one process (the largest run itself for a one-process backend)."""
        if 1 not in cls.world_sizes:
            pytest.skip(f"this backend runs on {cls.world_sizes} processes, not on one")
        if max(cls.world_sizes) == 1:
            return request.getfixturevalue("largest_run")
        return cls().launch(conformance_folder, "train", 1)

    def assert_matches_reference(self, run: TrainRun) -> None:
        """Losses and final weights of ``run`` equal the plain-PyTorch reference within tolerance."""
        want = self.reference()
        assert losses_match(run["losses"], want["losses"], self.atol, self.rtol), (
            f"losses on {run['world_size']} process(es) {run['losses']} differ from the "
            f"one-process reference {want['losses']}"
        )
        problems = differences(run["weights"], want["weights"], self.atol, self.rtol)
        assert not problems, f"weights after {self.steps} steps differ: {problems}"
        assert differences(run["initial_weights"], run["weights"], 0.0, 0.0), "nothing trained"

    # -- checks -----------------------------------------------------------
    def test_backend_is_registered(self):
        """A plugin registers a backend class of this name through the ``accel_backends`` hook."""
        from accel.plugins import registry

        assert self.backend_name, "set backend_name on the conformance class"
        names = registry.backends_by_name()
        assert self.backend_name in names, f"no registered backend {self.backend_name!r}: {names}"
        cls = names[self.backend_name]
        assert isinstance(cls, type) and issubclass(cls, Backend), f"{cls!r} is not a Backend"
        parameters = list(inspect.signature(cls).parameters)
        assert parameters[:1] == ["context"], (
            f"{cls.__name__}(...) takes {parameters}: a backend is built with one BackendContext "
            "(Backend.__init__(self, context)), never the Accelerator"
        )

    def test_one_process_trains_like_plain_pytorch(self, one_process_run):
        """One process: same losses and weights as the plain-PyTorch loop."""
        assert one_process_run["world_size"] == 1
        self.assert_matches_reference(one_process_run)

    def test_processes_train_like_one(self, largest_run):
        """``max(world_sizes)`` processes, the global batch split across them: same as one process."""
        if max(self.world_sizes) == 1:
            pytest.skip("a one-process backend: nothing to split")
        assert largest_run["world_size"] == max(self.world_sizes)
        self.assert_matches_reference(largest_run)

    def test_save_state_load_state_resumes_in_new_processes(self, conformance_folder, largest_run):
        """Train k steps, save_state, continue; new processes load_state and continue: same result."""
        world_size = max(self.world_sizes)
        resumed = self.launch(conformance_folder, "resume", world_size)
        saved = largest_run["weights_at_save"]
        assert differences(resumed["weights_before_load"], saved, 0.0, 0.0), (
            "the fresh model already had the saved weights: the check would prove nothing"
        )
        problems = differences(resumed["weights_after_load"], saved, self.resume_atol, 0.0)
        assert not problems, f"load_state did not restore the saved weights: {problems}"
        tail = largest_run["losses"][self.save_at :]
        assert losses_match(resumed["losses"], tail, self.resume_atol, 1e-5), (
            f"losses after resuming {resumed['losses']} differ from the uninterrupted {tail}"
        )
        problems = differences(resumed["weights"], largest_run["weights"], self.resume_atol, 0.0)
        assert not problems, (
            f"the resumed run ended elsewhere than the uninterrupted one: {problems}"
        )
