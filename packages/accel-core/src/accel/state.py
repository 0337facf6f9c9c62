"""Who am I, and what are we training with: PartialState, AcceleratorState, GradientState.

Each is a process-wide singleton (instances share one ``__dict__``), so a
``PartialState()`` made anywhere sees the same process group and device.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import logging
import math
import os
import sys
import threading
from collections.abc import Callable, Generator, Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Generic, NoReturn, Protocol, TypeVar, overload

import torch
import torch.distributed as dist

from accel import catalog, devices, env_vars
from accel.config.core_options import KEYS, PROCESS_SECTION, launched_distributed_type
from accel.faults import flight
from accel.kwargs import InitProcessGroupKwargs
from accel.types import DistributedType, PrecisionType

if TYPE_CHECKING:
    from torch.distributed.device_mesh import DeviceMesh

    from accel.kwargs import GradientAccumulationPlugin, TorchDynamoPlugin
    from accel.parallelism_config import ParallelismConfig


def _default_device(cpu: bool, local_rank: int) -> torch.device:
    forced = PROCESS_SECTION["torch_device"].from_env()
    if forced:
        return torch.device(forced)
    return devices.default_device(local_rank, cpu or KEYS["use_cpu"].from_env())


def _multi_type(device: torch.device) -> DistributedType:
    return DistributedType(devices.distributed_type_for(device.type))


def _process_group_backend(device: torch.device) -> str:
    return devices.process_group_backend(device.type)


def _elastic_attempt_store(world_size: int, timeout: timedelta) -> dist.PrefixStore | None:
    """The elastic agent's store, under a prefix of its own for this restart attempt; or None.

    Under torchrun the workers of every attempt share the agent's one TCPStore, and torch
    adds no per-attempt prefix: after a restart the new workers can read the addresses the
    dead attempt's workers published and fail to connect (``Gloo connectFullMesh failed``).
    Keys under ``accel/attempt_<TORCHELASTIC_RESTART_COUNT>/`` cannot collide.
    """
    restart = os.environ.get("TORCHELASTIC_RESTART_COUNT")
    host, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")
    if restart is None or not host or not port:
        return None
    if os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        return None
    client = dist.TCPStore(host, int(port), world_size, is_master=False, timeout=timeout)
    return dist.PrefixStore(f"accel/attempt_{restart}/", client)


def _destroy_process_group() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def leave_process_group() -> None:
    """End a successful run: wait for every process, then tear the process group down.

    The barrier lets every collective still in flight finish (gloo's barrier waits for the
    work issued before it) and keeps any process from closing its connections while another
    still uses them, so no communication thread is left holding tensors while the
    interpreter shuts down (an abort at exit). A failure to synchronise is ignored: the
    process is exiting anyway. accel's worker entry point calls this when the script returns
    normally; a script run otherwise gets the plain teardown at exit.
    """
    if not (dist.is_available() and dist.is_initialized()):
        return
    try:
        dist.barrier()
    except Exception:  # a peer already gone: nothing left to wait for
        pass
    _destroy_process_group()


_State = TypeVar("_State", bound="PartialState")
_Inputs = TypeVar("_Inputs")


def is_initialized() -> bool:
    """Whether an ``AcceleratorState`` (hence an Accelerator) has been set up in this process."""
    return AcceleratorState._is_set_up(AcceleratorState._shared_state)


class PartialState:
    """The process: rank, local rank, world size, device; sets up the process group once.

    Works without any plugin, so distributed inference needs only accel-core.
    ``backend=`` and ``timeout=`` (a ``timedelta`` or seconds) choose the process group's
    backend and timeout, as in Accelerate; ``init_process_group_kwargs`` does the same.
    """

    _shared_state: dict[str, Any] = {}

    def __init__(
        self,
        cpu: bool = False,
        *,
        init_process_group_kwargs: InitProcessGroupKwargs | None = None,
        backend: str | None = None,
        timeout: timedelta | float | None = None,
        **kwargs: object,
    ):
        self.__dict__ = self._shared_state
        if self.initialized:
            return
        pg_kwargs = init_process_group_kwargs
        # Accelerate's keywords (transformers passes --ddp_backend / --ddp_timeout through them).
        requested_backend = backend
        requested_timeout = timeout
        if isinstance(requested_timeout, (int, float)):
            requested_timeout = timedelta(seconds=requested_timeout)
        self._cpu = cpu or KEYS["use_cpu"].from_env()
        self.debug = KEYS["debug"].from_env()
        rank, local_rank, world = env_vars.world_info()
        self.process_index = rank
        self.local_process_index = local_rank
        self.num_processes = world
        self.device = _default_device(self._cpu, local_rank)
        self.timeout = requested_timeout or (pg_kwargs or InitProcessGroupKwargs()).timeout
        if world > 1:
            self._set_process_type(_multi_type(self.device))
            self.backend = _process_group_backend(self.device)
            # InitProcessGroupKwargs defaults to "nccl", which cannot serve a CPU run.
            if (
                pg_kwargs is not None
                and pg_kwargs.backend
                and not (self.device.type == "cpu" and pg_kwargs.backend == "nccl")
            ):
                self.backend = pg_kwargs.backend
            if requested_backend:
                self.backend = requested_backend
            if not dist.is_initialized():
                if self.device.type == "cuda":
                    torch.cuda.set_device(self.device)
                init_method = pg_kwargs.init_method if pg_kwargs is not None else None
                if "MASTER_ADDR" not in os.environ and (
                    "OMPI_COMM_WORLD_SIZE" in os.environ or "PMI_SIZE" in os.environ
                ):
                    raise RuntimeError(
                        "MASTER_ADDR and MASTER_PORT must be set when launching with mpirun"
                    )
                store = None
                if not init_method:
                    init_method = None
                    # the timeout is always set (InitProcessGroupKwargs fills it in)
                    if self.timeout is not None:
                        store = _elastic_attempt_store(world, self.timeout)
                flight.start(rank, world, self.timeout, self.backend)  # ACCEL_FLIGHT_DIR only
                dist.init_process_group(
                    backend=self.backend,
                    timeout=self.timeout,
                    init_method=init_method,
                    rank=rank,
                    world_size=world,
                    store=store,
                )
                # Tear the group down before interpreter exit: gloo's threads abort the process otherwise.
                atexit.register(_destroy_process_group)
        else:
            self._set_process_type(DistributedType.NO)
            self.backend = None
        if _launched_for_deepspeed(self._cpu):
            self._set_process_type(DistributedType.DEEPSPEED)
        self.fork_launched = False

    def _set_process_type(self, distributed_type: str) -> None:
        # PartialState's own type: written to the shared dict directly, past the
        # training type that AcceleratorState's ``distributed_type`` reads and writes
        self.__dict__["distributed_type"] = distributed_type

    # -- identity ---------------------------------------------------------
    @property
    def initialized(self) -> bool:
        """Whether the singleton has been set up in this process."""
        return "device" in self._shared_state

    @classmethod
    def current(cls: type[_State]) -> _State | None:
        """The process's state if it has been set up, else None; never sets one up.

        For plugins that need the state without creating it (``PartialState()`` would
        start the process group): ``AcceleratorState.current()`` is None until an
        Accelerator (or ``AcceleratorState(...)``) exists.
        """
        if not cls._is_set_up(cls._shared_state):
            return None
        state = cls.__new__(cls)
        state.__dict__ = cls._shared_state
        return state

    @staticmethod
    def _is_set_up(shared: Mapping[str, object]) -> bool:
        return "device" in shared

    def _missing(self, name: str) -> NoReturn:
        """Raise for a missing attribute, saying so when the shared state was reset meanwhile."""
        kind = type(self).__name__
        if not name.startswith("__") and not type(self)._is_set_up(self.__dict__):
            raise AttributeError(
                f"`{kind}` object has no attribute `{name}`. This happens if "
                f"`{kind}._reset_state()` was called and no `Accelerator` or `{kind}` "
                "was created since."
            )
        raise AttributeError(f"'{kind}' object has no attribute '{name}'")

    if not TYPE_CHECKING:  # at runtime only, so the checker still reports unknown names

        def __getattr__(self, name: str) -> NoReturn:
            """Reached only for a missing name: see ``_missing``."""
            self._missing(name)

    @property
    def use_distributed(self) -> bool:
        """True when more than one process takes part."""
        return self.num_processes > 1

    @property
    def is_main_process(self) -> bool:
        """True on global rank 0."""
        return self.process_index == 0

    @property
    def is_local_main_process(self) -> bool:
        """True on local rank 0 of each machine."""
        return self.local_process_index == 0

    @property
    def is_last_process(self) -> bool:
        """True on the last global rank."""
        return self.process_index == self.num_processes - 1

    @property
    def default_device(self) -> torch.device:
        """The device a fresh state would choose (ignores ``cpu=True``)."""
        return _default_device(False, self.local_process_index)

    def __repr__(self) -> str:
        return (
            f"Distributed environment: {self.distributed_type}{'  Backend: ' + self.backend if self.backend else ''}\n"
            f"Num processes: {self.num_processes}\nProcess index: {self.process_index}\n"
            f"Local process index: {self.local_process_index}\nDevice: {self.device}\n"
        )

    # -- synchronisation --------------------------------------------------
    def wait_for_everyone(self) -> None:
        """Barrier: every process waits here until all have arrived."""
        if self.use_distributed and dist.is_initialized():
            flight.record("wait_for_everyone")
            dist.barrier()

    @contextlib.contextmanager
    def _goes_first(self, is_first: bool) -> Generator[None, None, None]:
        if not is_first:
            self.wait_for_everyone()
        yield
        if is_first:
            self.wait_for_everyone()

    @contextlib.contextmanager
    def main_process_first(self) -> Generator[None, None, None]:
        """The main process runs the block first, then the others."""
        with self._goes_first(self.is_main_process):
            yield

    @contextlib.contextmanager
    def local_main_process_first(self) -> Generator[None, None, None]:
        """The local main process of each machine runs the block first."""
        with self._goes_first(self.is_local_main_process):
            yield

    # -- decorators -------------------------------------------------------
    def _only_if(self, predicate: Callable[[], bool], function: Callable | None) -> Callable:
        def decorator(fn: Callable) -> Callable:
            @functools.wraps(fn)
            def wrapper(*args: object, **kwargs: object) -> object:
                if predicate():
                    return fn(*args, **kwargs)
                return None

            return wrapper

        return decorator(function) if function is not None else decorator

    def on_main_process(self, function: Callable | None = None) -> Callable:
        """Decorator: run ``function`` only on the main process."""
        return self._only_if(lambda: self.is_main_process, function)

    def on_local_main_process(self, function: Callable | None = None) -> Callable:
        """Decorator: run ``function`` only on each machine's local main process."""
        return self._only_if(lambda: self.is_local_main_process, function)

    def on_last_process(self, function: Callable | None = None) -> Callable:
        """Decorator: run ``function`` only on the last process."""
        return self._only_if(lambda: self.is_last_process, function)

    def on_process(
        self, function: Callable | None = None, process_index: int | None = None
    ) -> Callable:
        """Decorator: run ``function`` only on global rank ``process_index``."""
        if function is None and process_index is None:
            raise ValueError("on_process needs process_index=N")
        return self._only_if(lambda: self.process_index == process_index, function)

    def on_local_process(
        self,
        function: Callable | None = None,
        local_process_index: int | None = None,
        *,
        local_process_idx: int | None = None,
    ) -> Callable:
        """Decorator: run ``function`` only on local rank ``local_process_index`` (``local_process_idx``, the seed's spelling)."""
        if local_process_index is None:
            local_process_index = local_process_idx
        if function is None and local_process_index is None:
            raise ValueError("on_local_process needs local_process_index=N")
        return self._only_if(lambda: self.local_process_index == local_process_index, function)

    def print(self, *args: object, **kwargs: Any) -> None:
        """``print`` on the local main process only."""
        if self.is_local_main_process:
            print(*args, **kwargs)

    # -- splitting work ---------------------------------------------------
    @contextlib.contextmanager
    def split_between_processes(
        self, inputs: _Inputs, apply_padding: bool = False
    ) -> Generator[_Inputs, None, None]:
        """Yield this process's contiguous share of ``inputs`` (list, tuple, dict of sequences, tensor).

        With ``apply_padding`` every share has the same length, the last element repeated.
        The split is over every process of the world; ``Accelerator.split_between_processes``
        splits over the data-parallel ranks of its backend instead.
        """
        yield split_inputs(inputs, self.num_processes, self.process_index, apply_padding)

    def set_process_layout(
        self,
        device: torch.device,
        num_processes: int,
        process_index: int,
        local_process_index: int,
        distributed_type: str,
        backend: str | None = None,
    ) -> None:
        """Take this process's device, ranks and type from a runtime that assigns them itself.

        For a backend's ``setup`` whose runtime (XLA's PJRT) decides devices and ordinals
        instead of the launcher's environment; every reader of the process-wide state
        (``Accelerator.device``, ``PartialState().process_index``, ...) sees them from then on.
        """
        self.device = device
        self.num_processes = num_processes
        self.process_index = process_index
        self.local_process_index = local_process_index
        self._set_process_type(distributed_type)
        self.distributed_type = distributed_type  # an AcceleratorState's training type too
        self.backend = backend

    def destroy_process_group(self) -> None:
        """Tear down the process group (end of a run)."""
        _destroy_process_group()

    @classmethod
    def _reset_state(cls) -> None:
        """Forget the singleton (tests and notebook relaunches)."""
        cls._shared_state.clear()


def _is_dataset(inputs: object) -> bool:
    """A ``datasets.Dataset``, or an object like one (``select``, ``__len__``, ``column_names``)."""
    datasets = sys.modules.get("datasets")
    if datasets is not None and isinstance(inputs, getattr(datasets, "Dataset", ())):
        return True
    return (
        callable(getattr(inputs, "select", None))
        and hasattr(inputs, "__len__")
        and hasattr(inputs, "column_names")
    )


def split_inputs(inputs: Any, world: int, rank: int, pad: bool = False) -> Any:
    """Share ``rank`` of ``world`` contiguous shares of ``inputs`` (list, tuple, dict of sequences,
    tensor, dataset).

    The first ``len(inputs) % world`` shares hold one element more; with ``pad`` every
    share has the longest length, completed by repeating the last element. A dataset
    (:func:`_is_dataset`) gives its share as a dataset: ``inputs.select(indices)``.
    """
    if world == 1:
        return inputs
    if isinstance(inputs, dict):
        lengths = {len(v) for v in inputs.values()}
        if len(lengths) > 1:
            raise ValueError(
                "split_between_processes: every value of the dict must have the same length"
            )
        return {k: split_inputs(v, world, rank, pad) for k, v in inputs.items()}
    length = len(inputs)
    per, extra = divmod(length, world)
    start = rank * per + min(rank, extra)
    end = start + per + (1 if rank < extra else 0)
    if _is_dataset(inputs):
        indices: Sequence[int] = range(start, end) if end > start else []
        missing = math.ceil(length / world) - (end - start)
        if pad and missing > 0 and length > 0:
            indices = [*indices, *[length - 1] * missing]
        return inputs.select(indices)
    part = inputs[start:end]
    if pad:
        target = math.ceil(length / world)
        missing = target - (end - start)
        if missing > 0 and length > 0:
            last = inputs[-1:]
            if isinstance(part, torch.Tensor):
                part = torch.cat([part] + [last] * missing)
            else:
                part = part + type(part)(list(last) * missing)
    return part


_RESET = "_accelerator_state_reset"
"""Set in the shared dict by ``AcceleratorState._reset_state()``, until the next AcceleratorState."""


_Field = TypeVar("_Field")


class _ProcessField(Generic[_Field]):
    """A PartialState field read through an AcceleratorState: missing after its reset."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, state: None, owner: type) -> _ProcessField[_Field]: ...
    @overload
    def __get__(self, state: PartialState, owner: type) -> _Field: ...
    def __get__(self, state: PartialState | None, owner: type) -> _Field | _ProcessField[_Field]:
        if state is None:
            return self
        shared = state.__dict__
        if _RESET in shared or self.name not in shared:
            return state._missing(self.name)  # raises, saying why
        return shared[self.name]

    def __set__(self, state: PartialState, value: _Field) -> None:
        state.__dict__[self.name] = value


class AcceleratorState(PartialState):
    """PartialState plus the training setup: mixed precision, distributed type, plugin configs.

    ``fsdp_on_cpu=False`` applies Accelerate's device rule: FSDP asked for (a plugin object
    or the launcher's config) on CPU processes is dropped, and the run is data-parallel.
    """

    _shared_state: dict[str, Any] = PartialState._shared_state

    def __init__(
        self,
        mixed_precision: str | None = None,
        cpu: bool = False,
        dynamo_plugin: TorchDynamoPlugin | None = None,
        _from_accelerator: bool = False,
        parallelism_config: ParallelismConfig | None = None,
        fsdp_on_cpu: bool = True,
        **kwargs: Any,
    ):
        if "mixed_precision" in self._shared_state and self._shared_state.get("_accelerator_ready"):
            self.__dict__ = self._shared_state
            if mixed_precision is not None and str(mixed_precision) != self.mixed_precision:
                raise ValueError(
                    f"AcceleratorState already set up with mixed_precision={self.mixed_precision!r}; "
                    f"an Accelerator cannot switch it to {mixed_precision!r} in the same process"
                )
            return
        plugins = {k: kwargs.pop(k) for k in list(kwargs) if k.endswith("_plugin")}
        self._shared_state.pop(_RESET, None)
        super().__init__(cpu=cpu, **kwargs)
        if mixed_precision is None:
            mixed_precision = KEYS["mixed_precision"].from_env()
        mixed_precision = str(mixed_precision).lower()
        from accel.plugins import registry

        if (
            mixed_precision not in PrecisionType.list()
            and mixed_precision not in registry.precisions()
        ):
            raise ValueError(
                f"unknown mixed_precision {mixed_precision!r}: use one of {', '.join(PrecisionType.list())}"
            )
        self.mixed_precision = mixed_precision
        self.dynamo_plugin = dynamo_plugin
        self.plugins = {k: v for k, v in plugins.items() if v is not None}
        self.distributed_type = _resolve_distributed_type(self, fsdp_on_cpu)
        from accel.parallelism_setup import resolve_layout

        self.parallelism_config, self.distributed_type, self.device_mesh = resolve_layout(
            parallelism_config, self.distributed_type, self.num_processes, self.device.type
        )  # N-D layout: checked, mesh built (or None)
        self._accelerator_ready = _from_accelerator

    # set by ``parallelism_config.setup_state``: the N-D layout and its mesh, or None
    parallelism_config: ParallelismConfig | None
    device_mesh: DeviceMesh | None

    # the process's fields, missing here (not in PartialState) once the training setup is reset
    _cpu: _ProcessField[bool] = _ProcessField()
    debug: _ProcessField[bool] = _ProcessField()
    process_index: _ProcessField[int] = _ProcessField()
    local_process_index: _ProcessField[int] = _ProcessField()
    num_processes: _ProcessField[int] = _ProcessField()
    device: _ProcessField[torch.device] = _ProcessField()
    backend: _ProcessField[str | None] = _ProcessField()

    @property
    def distributed_type(self) -> str:
        """The training strategy: PartialState's type, or FSDP, DEEPSPEED or MEGATRON_LM.

        As in Accelerate, ``PartialState().distributed_type`` keeps the process's own type
        (``MULTI_GPU``, ...) when an Accelerator trains with FSDP or Megatron-LM.
        """
        shared = self.__dict__
        if _TRAINING_TYPE in shared:
            return shared[_TRAINING_TYPE]
        if "distributed_type" in shared and _RESET not in shared:
            return shared["distributed_type"]
        return self._missing("distributed_type")  # says why it is missing

    @distributed_type.setter
    def distributed_type(self, distributed_type: str) -> None:
        self.__dict__[_TRAINING_TYPE] = distributed_type

    @property
    def fsdp_plugin(self) -> object:
        """The FSDP plugin object, if FSDP is used."""
        return self.plugins.get("fsdp_plugin")

    @fsdp_plugin.setter
    def fsdp_plugin(self, plugin: object) -> None:  # assignable, as in Accelerate
        plugins = self.__dict__.setdefault("plugins", {})
        if plugin is None:
            plugins.pop("fsdp_plugin", None)
        else:
            plugins["fsdp_plugin"] = plugin

    @property
    def deepspeed_plugin(self) -> object:
        """The DeepSpeed plugin object, if DeepSpeed is used."""
        return self.plugins.get("deepspeed_plugin")

    @staticmethod
    def _is_set_up(shared: Mapping[str, object]) -> bool:
        return "mixed_precision" in shared

    @property
    def megatron_lm_plugin(self) -> object:
        """The Megatron-LM plugin object, if Megatron-LM is used."""
        return self.plugins.get("megatron_lm_plugin")

    def __repr__(self) -> str:
        return super().__repr__() + f"Mixed precision type: {self.mixed_precision}\n"

    @classmethod
    def _reset_state(cls, reset_partial_state: bool = False) -> None:
        """Forget the training setup (and the process with ``reset_partial_state``).

        Without ``reset_partial_state`` the process stays set up for ``PartialState``, while
        an ``AcceleratorState`` has none of its fields until the next one is created (as in
        Accelerate, whose two states hold separate copies).
        """
        if reset_partial_state:
            cls._shared_state.clear()
            return
        if cls._shared_state:
            cls._shared_state[_RESET] = True
        for key in (
            "mixed_precision",
            _TRAINING_TYPE,
            "dynamo_plugin",
            "plugins",
            "_accelerator_ready",
            "parallelism_config",
            "device_mesh",
        ):
            cls._shared_state.pop(key, None)


_TRAINING_TYPE = "_training_distributed_type"
"""Where AcceleratorState keeps its ``distributed_type`` in the shared dict, beside PartialState's."""


def _launched_for_deepspeed(cpu: bool) -> bool:
    """Whether a launcher started this process for DeepSpeed (Accelerate's PartialState rule:
    a launched process, ``ACCELERATE_USE_DEEPSPEED`` or accel's distributed type, not ``cpu``)."""
    if cpu or "LOCAL_RANK" not in os.environ:
        return False
    return launched_distributed_type() == "DEEPSPEED"


_PLUGIN_TYPES = {
    "fsdp_plugin": DistributedType.FSDP,
    "deepspeed_plugin": DistributedType.DEEPSPEED,
    "megatron_lm_plugin": DistributedType.MEGATRON_LM,
}


def _resolve_distributed_type(state: AcceleratorState, fsdp_on_cpu: bool = True) -> str:
    """Plugin object passed in code > ``ACCEL_DISTRIBUTED_TYPE`` from the launcher > world size.

    Without ``fsdp_on_cpu``, FSDP asked for on CPU processes gives the world size's
    data-parallel type instead, and the FSDP plugin is dropped (Accelerate's rule).
    """
    resolved = state.distributed_type
    for key, dtype in _PLUGIN_TYPES.items():
        if key in state.plugins:
            resolved = dtype
            break
    else:
        launched = launched_distributed_type()
        if launched and launched != "NO" and launched not in catalog.DATA_PARALLEL_TYPES:
            resolved = launched
    if resolved == DistributedType.FSDP and not fsdp_on_cpu and state.device.type == "cpu":
        state.plugins.pop("fsdp_plugin", None)
        if state.is_main_process:
            logging.getLogger(__name__).warning(
                "FSDP is not applied on CPU processes (fsdp_on_cpu=False, Accelerate's rule): "
                "training runs data-parallel (%s)",
                state.distributed_type,
            )
        return state.distributed_type
    return resolved


class TrackedLoader(Protocol):
    """What GradientState reads of the data loader being iterated (a prepared loader)."""

    @property
    def end_of_dataloader(self) -> bool:
        """True while the loader yields its last batch."""
        ...

    @property
    def remainder(self) -> int:
        """Real samples of the last global batch when it was padded, else -1."""
        ...


class GradientState:
    """Gradient-synchronisation bookkeeping shared by the Accelerator, data loaders, optimizers, schedulers."""

    _shared_state: dict[str, Any] = {}

    def __init__(self, gradient_accumulation_plugin: GradientAccumulationPlugin | None = None):
        self.__dict__ = self._shared_state
        if not self.initialized:
            self.sync_gradients = True
            self.active_dataloader: TrackedLoader | None = None
            self.dataloader_references: list[TrackedLoader | None] = [None]
            self.plugin_kwargs: dict[str, Any] = {}
            self.step = 0
            self.is_xla_gradients_synced = False
        if gradient_accumulation_plugin is not None:
            # only the options that differ from the plugin's defaults, as Accelerate
            self.plugin_kwargs = gradient_accumulation_plugin.to_kwargs()

    @property
    def initialized(self) -> bool:
        """Whether the singleton has been set up."""
        return "sync_gradients" in self._shared_state

    @property
    def num_steps(self) -> int:
        """Number of accumulation steps."""
        return self.plugin_kwargs.get("num_steps", 1)

    @property
    def adjust_scheduler(self) -> bool:
        """Whether the scheduler steps on every micro-batch to account for accumulation."""
        return self.plugin_kwargs.get("adjust_scheduler", True)

    @property
    def sync_with_dataloader(self) -> bool:
        """Whether the end of a data loader forces a synchronising step."""
        return self.plugin_kwargs.get("sync_with_dataloader", True)

    @property
    def sync_each_batch(self) -> bool:
        """Whether gradients are synchronised on every micro-batch (saves memory)."""
        return self.plugin_kwargs.get("sync_each_batch", False)

    @property
    def end_of_dataloader(self) -> bool:
        """True while the active data loader yields its last batch."""
        return bool(self.active_dataloader is not None and self.active_dataloader.end_of_dataloader)

    @property
    def remainder(self) -> int:
        """Real samples of the active loader's last global batch when it was padded, else -1."""
        return -1 if self.active_dataloader is None else self.active_dataloader.remainder

    @property
    def in_dataloader(self) -> bool:
        """True while iterating a prepared data loader."""
        return self.active_dataloader is not None

    def _set_sync_gradients(self, sync_gradients: bool) -> None:
        self.sync_gradients = sync_gradients

    def _add_dataloader(self, dataloader: TrackedLoader) -> None:
        self.active_dataloader = dataloader
        self.dataloader_references.append(dataloader)

    def _remove_dataloader(self, dataloader: TrackedLoader) -> None:
        self.dataloader_references.remove(dataloader)
        self.active_dataloader = self.dataloader_references[-1]

    @classmethod
    def _reset_state(cls) -> None:
        """Forget the singleton (tests)."""
        cls._shared_state.clear()


class _ThreadLocalState(threading.local):
    """A class attribute holding a different dict in every thread."""

    def __init__(self) -> None:
        self.data: dict[str, object] = {}

    def __get__(self, obj: object, owner: type | None = None) -> dict[str, object]:
        return self.data


def use_thread_local_state() -> None:
    """From now on, give every thread its own PartialState, AcceleratorState and GradientState.

    torch_xla runs one replica per thread when a process drives several devices (TPU v2/v3,
    virtual CPU devices); accel-tpu calls this in each spawned process before the replicas start.
    """
    if isinstance(PartialState.__dict__["_shared_state"], _ThreadLocalState):
        return
    shared = _ThreadLocalState()
    # the dict class attribute becomes a descriptor returning this thread's dict
    PartialState._shared_state = shared  # ty: ignore[invalid-assignment]
    AcceleratorState._shared_state = shared  # ty: ignore[invalid-assignment]
    GradientState._shared_state = _ThreadLocalState()  # ty: ignore[invalid-assignment]
