"""The FSDP backend: shards models with FSDP2 (``fully_shard``) or FSDP1, checkpoints through DCP."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Generator, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import torch
import torch.distributed as dist
from accel.backends import Backend, SetAsideGradients, SetAsideGroup
from accel.distributed.process import ensure_process_group, plugin_object
from accel.precision import dtype_of

from .checkpointing import (
    full_model_state,
    local_state,
    set_full_model_state,
    set_full_optimizer_state,
    shard_of,
    state_dict_options,
)
from .config import FullyShardedDataParallelPlugin
from .nd import NDLayout, NDParallelMixin
from .wrap import fsdp1_policy, ignored_modules, units_to_shard

if TYPE_CHECKING:
    from accel.optimizer import AcceleratedOptimizer
    from torch.distributed import ProcessGroup
    from torch.distributed.checkpoint.state_dict import ValueType
    from torch.distributed.device_mesh import DeviceMesh
    from torch.nn.modules.module import _IncompatibleKeys

_WRAPPER_PREFIXES = re.compile(r"(_fsdp_wrapped_module\.|_checkpoint_wrapped_module\.|_orig_mod\.)")


def _clean(name: str) -> str:
    return _WRAPPER_PREFIXES.sub("", name)


class FSDPBackend(NDParallelMixin, Backend):
    """Fully Sharded Data Parallel: parameters, gradients and optimizer state sharded across processes."""

    name = "fsdp"
    distributed_types = ("FSDP",)
    _dcp_group: ProcessGroup | None = None
    """The gloo group of asynchronous saves (see :meth:`_checkpoint_group`)."""

    def setup(self) -> None:
        """Read the plugin, make sure a process group exists, use a sharded grad scaler for fp16."""
        self.plugin: FullyShardedDataParallelPlugin = plugin_object(
            self.context, "fsdp_plugin", FullyShardedDataParallelPlugin
        )
        ensure_process_group()  # one process: FSDP still needs a (trivial) group
        self.nd = NDLayout.of(self.context)  # N-D parallelism (accel_fsdp.nd), or None
        if self.nd is not None and self.version != 2:
            raise ValueError("a ParallelismConfig needs FSDP2: set fsdp_version=2")
        precision = self.context.precision
        if precision.scaler is not None:
            from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

            handler = self.context.handlers.get("GradScalerKwargs")
            precision.scaler = ShardedGradScaler(
                self.context.device.type, **(handler.to_kwargs() if handler else {})
            )
        self._param_map: dict[int, torch.nn.Parameter] = {}

    @property
    def version(self) -> int:
        """1 or 2."""
        version = self.plugin.fsdp_version
        assert version is not None  # set by the plugin's __post_init__
        return version

    # -- wrapping -------------------------------------------------------------
    def wrap_model(self, model: torch.nn.Module) -> torch.nn.Module:
        """Shard ``model``; remember how its parameters were replaced (for optimizers made before)."""
        before = {name: param for name, param in model.named_parameters()}
        wrapped = self._shard_fsdp2(model) if self.version == 2 else self._shard_fsdp1(model)
        after = {_clean(name): param for name, param in wrapped.named_parameters()}
        for name, old in before.items():
            if name in after and after[name] is not old:
                self._param_map[id(old)] = after[name]
        return wrapped

    def _mixed_precision_dtype(self) -> torch.dtype | None:
        """The run's precision's dtype (fp8: bf16 outside the FP8 layers), read at wrapping time."""
        return self.context.precision.dtype

    def _mesh(self) -> DeviceMesh | None:
        from torch.distributed.device_mesh import init_device_mesh

        if self.nd is not None:
            return self.nd.fsdp_mesh
        world = dist.get_world_size()
        device = self.context.device.type
        strategy = str(self.plugin.sharding_strategy)  # a name once the plugin is built
        if strategy == "NO_SHARD":
            return init_device_mesh(device, (world, 1), mesh_dim_names=("replicate", "shard"))
        if strategy.startswith("HYBRID"):
            # processes per node: the launcher's LOCAL_WORLD_SIZE, else the GPUs of this node
            local = int(
                os.environ.get(
                    "LOCAL_WORLD_SIZE", torch.cuda.device_count() if device == "cuda" else world
                )
            )
            local = max(1, min(local, world))
            return init_device_mesh(
                device, (world // local, local), mesh_dim_names=("replicate", "shard")
            )
        return init_device_mesh(device, (world,), mesh_dim_names=("shard",))

    def _shard_fsdp2(self, model: torch.nn.Module) -> torch.nn.Module:
        from torch.distributed.fsdp import (
            CPUOffloadPolicy,
            MixedPrecisionPolicy,
            OffloadPolicy,
            fully_shard,
        )

        if self.nd is not None:  # tensor parallelism first, then FSDP over the data-parallel mesh
            model = self.nd.parallelize(model)
            if self.nd.fsdp_mesh is None:
                return model
        plugin = self.plugin
        mp = plugin.mixed_precision_policy
        if mp is None:
            dtype = self._mixed_precision_dtype()
            mp = (
                MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=dtype)
                if dtype is not None
                else MixedPrecisionPolicy()
            )
        elif isinstance(mp, dict):
            fields: dict[str, Any] = {
                k: dtype_of(v) if isinstance(v, str) else v for k, v in mp.items()
            }
            mp = MixedPrecisionPolicy(**fields)
        kwargs: dict[str, Any] = {
            "mesh": self._mesh(),
            "reshard_after_forward": plugin.reshard_after_forward,
            "mp_policy": mp,
            "offload_policy": CPUOffloadPolicy(pin_memory=self.context.device.type == "cuda")
            if plugin.offload_params
            else OffloadPolicy(),  # pinned host memory needs a GPU
        }
        units = units_to_shard(model, plugin)
        ignored = ignored_modules(model, plugin)
        if ignored:  # FSDP2 leaves parameters, not modules, unsharded
            kwargs["ignored_params"] = {p for m in ignored for p in m.parameters()}
            inside = {id(sub) for m in ignored for sub in m.modules()}
            units = [u for u in units if id(u) not in inside]
        if plugin.activation_checkpointing:
            from torch.distributed._composable import checkpoint

            for unit in units or [model]:
                checkpoint(unit)
        for unit in units:
            fully_shard(unit, **kwargs)
        fully_shard(model, **kwargs)
        return model

    def _shard_fsdp1(self, model: torch.nn.Module) -> torch.nn.Module:
        from torch.distributed.fsdp import (
            BackwardPrefetch,
            CPUOffload,
            MixedPrecision,
            ShardingStrategy,
        )
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

        plugin = self.plugin
        mp = plugin.mixed_precision_policy
        if mp is None:
            dtype = self._mixed_precision_dtype()
            mp = (
                MixedPrecision(param_dtype=dtype, reduce_dtype=dtype, buffer_dtype=dtype)
                if dtype is not None
                else None
            )
        elif isinstance(mp, dict):
            fields: dict[str, Any] = {
                k: dtype_of(v) if isinstance(v, str) else v for k, v in mp.items()
            }
            mp = MixedPrecision(**fields)
        if mp is not None and not isinstance(mp, MixedPrecision):
            raise TypeError(
                f"FSDP1 takes torch's MixedPrecision as mixed_precision_policy, not {type(mp).__name__}"
            )
        prefetch = plugin.backward_prefetch
        strategy = str(plugin.sharding_strategy)  # a name once the plugin is built
        device = self.context.device
        wrapped = FSDP(
            model,
            sharding_strategy=getattr(
                ShardingStrategy,
                "_HYBRID_SHARD_ZERO2" if strategy == "HYBRID_SHARD_ZERO2" else strategy,
            ),
            auto_wrap_policy=fsdp1_policy(model, plugin),
            mixed_precision=mp,
            cpu_offload=CPUOffload(offload_params=plugin.offload_params),
            backward_prefetch=None
            if prefetch in (None, "NO_PREFETCH")
            else getattr(BackwardPrefetch, str(prefetch)),
            forward_prefetch=bool(plugin.forward_prefetch),
            limit_all_gathers=plugin.limit_all_gathers,
            use_orig_params=bool(plugin.use_orig_params),
            sync_module_states=bool(plugin.sync_module_states),
            ignored_modules=ignored_modules(model, plugin),
            param_init_fn=plugin.param_init_fn,
            device_id=device,
            # hybrid: shard within a node, replicate across nodes (FSDP1 would otherwise derive
            # the node from the GPU count, which is 0 on CPU, and never average across ranks)
            device_mesh=self._mesh() if strategy.startswith("HYBRID") else None,
        )
        if plugin.activation_checkpointing:
            from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import (
                apply_activation_checkpointing,
            )

            units = {id(m) for m in units_to_shard(model, plugin)}
            apply_activation_checkpointing(wrapped, check_fn=lambda m: id(m) in units)
        return wrapped

    def prepare_optimizer(
        self, optimizer: torch.optim.Optimizer, device_placement: bool = True
    ) -> AcceleratedOptimizer:
        """Point an optimizer made before ``prepare`` at the sharded parameters, then wrap it."""
        for group in optimizer.param_groups:
            group["params"] = [self._param_map.get(id(p), p) for p in group["params"]]
        flat = [p for g in optimizer.param_groups for p in g["params"]]
        if (
            self.version == 1
            and not self.plugin.use_orig_params
            and any(p.__class__.__name__ != "FlatParameter" for p in flat)
        ):
            raise ValueError(
                "with FSDP1 and use_orig_params=False create the optimizer after prepare(model), from the prepared model's parameters"
            )
        return super().prepare_optimizer(optimizer, device_placement)

    # -- training step ----------------------------------------------------------
    reduces_gradients_after_no_sync = False
    """FSDP reduces in backward: ``train_step`` runs a synchronising step's last micro-batch
    outside ``no_sync``."""

    @property
    def micro_batching_refusal(self) -> str | None:
        """FSDP1 keeps gradients accumulated under ``no_sync`` in its flat parameters: refused."""
        if self.version == 1:
            return "train_step (automatic micro-batching) needs FSDP2: set fsdp_version=2"
        return None

    def set_aside_gradients(self, model: torch.nn.Module) -> SetAsideGroup:
        """The sharded ``.grad`` and FSDP2's unsharded gradients accumulated under ``no_sync``.

        Under ``no_sync`` FSDP2 keeps each parameter's gradient on its unsharded parameter until
        the next reducing backward, so those are set aside too.
        """
        unsharded = []
        for module in model.modules():
            get_state = getattr(module, "_get_fsdp_state", None)
            group = getattr(get_state(), "_fsdp_param_group", None) if get_state else None
            for fsdp_param in getattr(group, "fsdp_params", ()):
                param = getattr(fsdp_param, "_unsharded_param", None)
                if param is not None:
                    unsharded.append(param)
        return SetAsideGroup([SetAsideGradients(model.parameters()), SetAsideGradients(unsharded)])

    def agreement_modules(self, model: torch.nn.Module) -> list[torch.nn.Module]:
        """FSDP2's units (``fully_shard``-ed modules): each forward starts with an all-gather."""
        from torch.distributed.fsdp import FSDPModule

        return [m for m in model.modules() if isinstance(m, FSDPModule)]

    def reset_after_failed_attempt(self, model: torch.nn.Module) -> None:
        """FSDP2's ``reset_iter_state`` on the root: every unit resharded, training states idle.

        A forward left part-way keeps some units unsharded and in their forward state; without
        this, the retry would skip those units' all-gathers on this process only. Torch without
        ``reset_iter_state``: every unit is resharded.
        """
        from torch.distributed.fsdp import FSDPModule

        if not isinstance(model, FSDPModule):
            return
        reset = getattr(model, "reset_iter_state", None)
        if reset is not None:
            reset()
            return
        for unit in model.modules():
            if isinstance(unit, FSDPModule):
                unit.reshard()

    @contextlib.contextmanager
    def no_sync(self, model: torch.nn.Module) -> Generator[None, None, None]:
        """Skip gradient reduction (FSDP2: ``set_requires_gradient_sync``; FSDP1: ``no_sync``)."""
        set_sync = getattr(model, "set_requires_gradient_sync", None)
        if set_sync is not None:
            set_sync(False)
            try:
                yield
            finally:
                set_sync(True)
        else:
            no_sync = getattr(model, "no_sync", None)  # FSDP1's
            if no_sync is None:
                raise TypeError(f"{type(model).__name__} is not an FSDP-wrapped module")
            with no_sync():
                yield

    def clip_grad_norm_(
        self, parameters: Iterable[torch.Tensor], max_norm: float, norm_type: float = 2.0
    ) -> torch.Tensor:
        """Clip by the norm over every shard."""
        parameters = list(parameters)
        if self.nd is not None:  # TP / FSDP DTensors and plain tensors together
            from .nd import clip_grad_norm_

            return clip_grad_norm_(parameters, max_norm, norm_type)
        if self.version == 1:
            ids = {id(p) for p in parameters}
            for model in self.context.prepared.models:
                clip = getattr(model, "clip_grad_norm_", None)
                if clip is not None and any(id(p) in ids for p in model.parameters()):
                    return clip(max_norm, norm_type)
        norm = torch.nn.utils.clip_grad_norm_(parameters, max_norm, norm_type=norm_type)
        full_tensor = getattr(norm, "full_tensor", None)  # a DTensor's
        return full_tensor() if full_tensor is not None else norm

    # -- state --------------------------------------------------------------------
    def unwrap_model(
        self,
        model: torch.nn.Module,
        keep_fp32_wrapper: bool = True,
        keep_torch_compile: bool = True,
    ) -> torch.nn.Module:
        """FSDP1: the wrapped module; FSDP2: the model itself (sharded in place)."""
        model = super().unwrap_model(
            model, keep_fp32_wrapper=keep_fp32_wrapper, keep_torch_compile=keep_torch_compile
        )
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

        return model.module if isinstance(model, FSDP) else model

    def get_state_dict(
        self, model: torch.nn.Module, unwrap: bool = True
    ) -> dict[str, torch.Tensor]:
        """The full state dict, gathered to the main process (empty elsewhere)."""
        full = full_model_state(model)
        # a full (gathered, CPU) model state dict holds plain tensors only
        return {_clean(k): cast("torch.Tensor", v) for k, v in full.items()}

    def load_model_state_dict(
        self, model: torch.nn.Module, state_dict: dict[str, torch.Tensor], strict: bool = True
    ) -> _IncompatibleKeys:
        """Load a full state dict; the main process's copy is broadcast and sharded."""
        # plain tensors are state-dict values: the dict only reads as narrower (invariance)
        return set_full_model_state(model, cast("dict[str, ValueType]", state_dict), strict)

    @property
    def supports_async_save(self) -> bool:
        """``save_state(async_save=True)`` runs in the background except for FSDP1 sharded
        states (ShardedTensors, which core's staging does not copy)."""
        return not (self.version == 1 and self.sharded and not self._local_kind)

    def _checkpoint_group(self) -> ProcessGroup | None:
        """During an asynchronous save, a gloo group of every process for DCP's collectives
        in the writer thread (made once, by every process at the same save); else None."""
        from accel.checkpoint.layout import is_staging

        if not is_staging():
            return None
        if self._dcp_group is None:
            group = dist.new_group(backend="gloo")  # every process is a member
            assert isinstance(group, dist.ProcessGroup)
            self._dcp_group = group
        return self._dcp_group

    @property
    def sharded(self) -> bool:
        """Whether checkpoints are written as DCP shards."""
        return self.plugin.state_dict_type != "FULL_STATE_DICT"

    @property
    def _local_kind(self) -> bool:
        return self.plugin.state_dict_type == "LOCAL_STATE_DICT"

    def _save_local(self, model: torch.nn.Module, target: Path) -> None:
        """Each rank writes its own flat shards (``rank<r>.pt``): same-world-size resume only."""

        shards = {
            key: shard_of(value).detach().cpu()
            for key, value in local_state(model).items()
            if key.endswith("_flat_param")
        }
        from accel.checkpoint.layout import write_object

        target.mkdir(parents=True, exist_ok=True)
        write_object(shards, target / f"rank{self.context.process_index}.pt")

    def _load_local(self, model: torch.nn.Module, target: Path, weights_only: bool) -> None:
        from accel.errors import CheckpointError

        saved_by = len(list(target.glob("rank*.pt")))
        if saved_by != self.context.num_processes:
            raise CheckpointError(
                f"{target} is a LOCAL_STATE_DICT checkpoint of {saved_by} processes and loads only "
                f"on as many (now {self.context.num_processes}); save with "
                "state_dict_type=SHARDED_STATE_DICT to resume on another number of processes"
            )
        shards = torch.load(
            target / f"rank{self.context.process_index}.pt", weights_only=weights_only
        )
        with torch.no_grad():  # the local shards are views of the flat parameters: copy in place
            state = local_state(model)
            for key, tensor in shards.items():
                shard_of(state[key]).copy_(tensor)

    def save_model_state(
        self, model: torch.nn.Module, folder: Path, index: int, safe_serialization: bool = True
    ) -> None:
        """SHARDED: DCP into ``pytorch_model_fsdp_<i>/``; LOCAL: per-rank shards; FULL: one file."""
        if not self.sharded:
            return super().save_model_state(model, folder, index, safe_serialization)
        target = folder / f"pytorch_model_fsdp_{index}"
        if self._local_kind:
            return self._save_local(model, target)
        from torch.distributed.checkpoint.state_dict import get_model_state_dict

        from . import dcp_io

        state = {"model": get_model_state_dict(model)}
        dcp_io.save_or_stage(state, target, self._checkpoint_group())

    def load_model_state(
        self,
        model: torch.nn.Module,
        folder: Path,
        index: int,
        strict: bool = True,
        weights_only: bool = True,
    ) -> None:
        """Restore what :meth:`save_model_state` wrote (DCP reshards to this world size)."""
        shards = folder / f"pytorch_model_fsdp_{index}"
        if not shards.exists():
            return super().load_model_state(
                model, folder, index, strict=strict, weights_only=weights_only
            )
        if self._local_kind:
            return self._load_local(model, shards, weights_only)
        from accel.checkpoint import dcp_files
        from torch.distributed.checkpoint.state_dict import (
            get_model_state_dict,
            set_model_state_dict,
        )

        state = {"model": get_model_state_dict(model)}
        dcp_files.load(state, shards)
        set_model_state_dict(model, state["model"], options=state_dict_options(strict=strict))

    def save_optimizer_state(
        self,
        optimizer: torch.optim.Optimizer,
        folder: Path,
        index: int,
        model: torch.nn.Module | None = None,
    ) -> None:
        """SHARDED: DCP into ``optimizer_<i>/``; FULL: the full optimizer state from the main process."""
        from accel.checkpoint.layout import optimizer_file, write_object
        from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict

        inner = getattr(optimizer, "optimizer", optimizer)
        if model is None:
            return super().save_optimizer_state(optimizer, folder, index, model)
        if self.sharded:
            from . import dcp_io

            state = {"optimizer": get_optimizer_state_dict(model, inner)}
            dcp_io.save_or_stage(state, folder / f"optimizer_{index}", self._checkpoint_group())
            return
        # On a CPU device "offloading" copies nothing, and FSDP1's gathered optimizer states
        # then share one buffer (exp_avg came back equal to exp_avg_sq): offload only from GPUs.
        offload = self.context.device.type != "cpu"
        state = get_optimizer_state_dict(
            model, inner, options=state_dict_options(full_state_dict=True, cpu_offload=offload)
        )
        if self.context.is_main_process:
            write_object(state, optimizer_file(folder, index))

    def load_optimizer_state(
        self,
        optimizer: torch.optim.Optimizer,
        folder: Path,
        index: int,
        model: torch.nn.Module | None = None,
        weights_only: bool = True,
    ) -> None:
        """Restore what :meth:`save_optimizer_state` wrote."""
        from accel.checkpoint.layout import optimizer_file, read_object
        from torch.distributed.checkpoint.state_dict import (
            get_optimizer_state_dict,
            set_optimizer_state_dict,
        )

        inner = getattr(optimizer, "optimizer", optimizer)
        if model is None:
            return super().load_optimizer_state(optimizer, folder, index, model, weights_only)
        shards = folder / f"optimizer_{index}"
        if shards.exists():
            import torch.distributed.checkpoint as dcp
            from accel.checkpoint import dcp_files

            state = {"optimizer": get_optimizer_state_dict(model, inner)}
            # FSDP1's optimizer state holds ShardedTensors; flattening them in the load planner
            # loses the param_groups entry ("Missing key ... optimizer.param_groups").
            planner = dcp.DefaultLoadPlanner(flatten_sharded_tensors=self.version != 1)
            dcp_files.load(state, shards, planner=planner)
            set_optimizer_state_dict(model, inner, state["optimizer"])
            return

        full = read_object(optimizer_file(folder, index), weights_only)
        set_full_optimizer_state(model, inner, full, self.version)
