"""Kwargs handlers and configuration dataclasses owned by core, under Accelerate's names."""

from __future__ import annotations

import contextlib
import copy
import os
from collections.abc import Generator, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

from accel import env_vars
from accel.config.core_options import DYNAMO_KEYS, PROCESS_SECTION
from accel.types import DynamoBackend

_Handler = TypeVar("_Handler", bound="KwargsHandler")


class KwargsHandler:
    """Base of the kwargs handlers: ``to_kwargs()`` returns the fields changed from their defaults."""

    @classmethod
    def find(cls: type[_Handler], handlers: Mapping[str, KwargsHandler]) -> _Handler | None:
        """This class's handler among ``handlers`` (keyed by class name, as the Accelerator's), or None."""
        found = handlers.get(cls.__name__)
        return found if isinstance(found, cls) else None

    def to_dict(self) -> dict[str, Any]:
        """All fields as a dict."""
        return copy.deepcopy(self.__dict__)

    def to_kwargs(self) -> dict[str, Any]:
        """The fields whose value differs from the class default.

        The default is built with the ``ACCEL_*`` / ``ACCELERATE_*`` variables hidden (as
        Accelerate builds it in a cleared environment), so a value that came from such a
        variable counts as set and is kept.
        """
        with _without_accel_environment():
            default = self.__class__().to_dict()
        return {k: v for k, v in self.to_dict().items() if default.get(k) != v}


@contextlib.contextmanager
def _without_accel_environment() -> Generator[None, None, None]:
    """Hide the ``ACCEL_*`` and ``ACCELERATE_*`` environment variables for the block."""
    prefixes = (env_vars.ACCEL_PREFIX, env_vars.ACCELERATE_PREFIX)
    hidden = {k: v for k, v in os.environ.items() if k.startswith(prefixes)}
    for key in hidden:
        del os.environ[key]
    try:
        yield
    finally:
        os.environ.update(hidden)


@dataclass
class AutocastKwargs(KwargsHandler):
    """Arguments of ``torch.autocast`` used for mixed precision (``enabled``, ``cache_enabled``)."""

    enabled: bool = True
    cache_enabled: bool | None = None


@dataclass
class GradScalerKwargs(KwargsHandler):
    """Arguments of the fp16 ``torch.amp.GradScaler``."""

    init_scale: float = 65536.0
    growth_factor: float = 2.0
    backoff_factor: float = 0.5
    growth_interval: int = 2000
    enabled: bool = True


@dataclass
class InitProcessGroupKwargs(KwargsHandler):
    """Arguments of ``torch.distributed.init_process_group``; ``timeout`` applies to every collective."""

    backend: str | None = "nccl"
    init_method: str | None = None
    timeout: timedelta | None = None

    def __post_init__(self):
        if self.timeout is None:
            seconds = PROCESS_SECTION["timeout"].from_env()
            self.timeout = timedelta(seconds=seconds)


@dataclass
class DataLoaderConfiguration:
    """How ``prepare`` treats data loaders (sharding, seeding, resumability).

    The fields are Accelerate's, plus ``empty_batches`` (accel only). With
    ``even_batches=False`` the last round is not completed with repeated samples:
    a process left without samples simply stops one batch before the others, as in
    Accelerate (so a step that runs a collective such as ``gather_for_metrics`` on
    every process must not be the extra one). ``empty_batches=True`` (only read when
    ``even_batches=False``) gives such a process an empty batch (zero rows, same
    structure) instead, so every process takes the same number of steps and
    collectives stay matched; the training loop must then skip or mask the empty
    batch (a mean loss over zero samples is NaN).
    """

    split_batches: bool = False
    dispatch_batches: bool | None = None
    even_batches: bool = True
    use_seedable_sampler: bool = False
    data_seed: int | None = None
    non_blocking: bool = False
    use_stateful_dataloader: bool = False
    empty_batches: bool = False


@dataclass
class ProjectConfiguration:
    """Where to save (``project_dir``, ``logging_dir``) and how to name and prune checkpoints."""

    project_dir: str | None = None
    logging_dir: str | None = None
    automatic_checkpoint_naming: bool = False
    total_limit: int | None = None
    iteration: int = 0
    save_on_each_node: bool = False

    def set_directories(self, project_dir: str | None = None) -> None:
        """Set ``project_dir`` and default ``logging_dir`` to it."""
        self.project_dir = project_dir
        if self.logging_dir is None:
            self.logging_dir = project_dir

    def __post_init__(self):
        self.set_directories(self.project_dir)
        if self.total_limit is not None and self.total_limit < 1:
            raise ValueError(
                f"ProjectConfiguration(total_limit={self.total_limit}): use None or a number >= 1"
            )


@dataclass
class GradientAccumulationPlugin(KwargsHandler):
    """How gradients are accumulated: ``num_steps``, scheduler adjustment, data-loader sync.

    ``keep_global_batch_size`` (accel only): a checkpoint resumed on another number of
    processes or per-process batch size re-derives ``num_steps`` so that per-process batch x
    processes x steps stays the same, and the schedule advances as before (docs/elastic.md); a size that cannot
    keep it is refused with the sizes that can.
    """

    num_steps: int | None = None
    adjust_scheduler: bool = True
    sync_with_dataloader: bool = True
    sync_each_batch: bool = False
    keep_global_batch_size: bool = False

    def __post_init__(self):
        if self.num_steps is not None and self.num_steps < 1:
            raise ValueError(
                f"GradientAccumulationPlugin(num_steps={self.num_steps}): use a number >= 1"
            )


@dataclass
class TorchDynamoPlugin(KwargsHandler):
    """torch.compile settings; ``use_regional_compilation`` compiles each repeated block separately."""

    backend: DynamoBackend | str | None = None
    mode: str | None = None
    fullgraph: bool | None = None
    dynamic: bool | None = None
    options: dict[str, object] | None = None
    disable: bool = False
    use_regional_compilation: bool | None = None

    def __post_init__(self):
        if self.backend is None:
            self.backend = DYNAMO_KEYS["dynamo_backend"].from_env()
        self.backend = DynamoBackend(str(self.backend).upper())
        if self.mode is None:
            self.mode = DYNAMO_KEYS["dynamo_mode"].from_env()
        if self.fullgraph is None:
            self.fullgraph = DYNAMO_KEYS["dynamo_use_fullgraph"].from_env()
        if self.dynamic is None:  # unset: torch.compile's own choice
            self.dynamic = DYNAMO_KEYS["dynamo_use_dynamic"].from_env(default=None)
        if self.use_regional_compilation is None:
            self.use_regional_compilation = DYNAMO_KEYS[
                "dynamo_use_regional_compilation"
            ].from_env()

    def to_dict(self) -> dict[str, Any]:
        """All fields as a dict, the backend as its lowercase name (``"inductor"``), as in Accelerate."""
        config = super().to_dict()
        config["backend"] = str(self.backend).lower()
        return config

    def to_kwargs(self) -> dict[str, Any]:
        """The fields changed from their defaults (environment variables count as set), without ``use_regional_compilation``."""
        kwargs = super().to_kwargs()
        kwargs.pop("use_regional_compilation", None)
        return kwargs

    @property
    def enabled(self) -> bool:
        """Whether compilation is requested."""
        return self.backend != DynamoBackend.NO and not self.disable

    def to_compile_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for ``torch.compile``."""
        kwargs: dict[str, Any] = {
            "backend": str(self.backend).lower(),
            "fullgraph": self.fullgraph,
            "dynamic": self.dynamic,
        }
        if self.options:
            kwargs["options"] = self.options
        elif self.mode:
            kwargs["mode"] = self.mode
        return kwargs
