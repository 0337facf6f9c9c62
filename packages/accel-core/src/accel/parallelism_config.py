"""``ParallelismConfig``: how the world is split into data-parallel, tensor, context and sequence groups.

One dataclass describes an N-D layout (TorchTitan's ``ParallelDims`` is the model):
``dp_replicate_size`` x ``dp_shard_size`` x ``cp_size`` x ``sp_size`` x ``tp_size`` processes,
and builds the named :class:`torch.distributed.DeviceMesh` the training script and the backend
use (dimensions ``dp_replicate``, ``dp_shard``, ``cp``, ``sp``, ``tp`` in that order, plus the
flattened ``dp``, ``dp_shard_cp`` and ``dp_cp``). Which backend applies the layout is the FSDP
plugin's business (accel-fsdp): this module only holds the configuration, so that
``from accel import ParallelismConfig`` works with accel-core alone. What the layout means
for a run (its distributed type, the size checks, the mesh) is :mod:`accel.parallelism_setup`;
the mesh is built by :mod:`accel.device_mesh`, the only place torch is imported.

Unset fields come from the environment, under Accelerate's names (``PARALLELISM_CONFIG_TP_SIZE``,
...: what ``accel launch`` sets from the ``parallelism_config`` section and the
``--parallelism_config_*`` flags), else 1 / ``"torch"`` / ``"deepspeed"``.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from accel.config.options import Option
from accel.errors import ConfigError

if TYPE_CHECKING:
    from torch.distributed.device_mesh import DeviceMesh

ENV_PREFIX = "PARALLELISM_CONFIG_"
"""Prefix of the variables that fill unset fields (Accelerate's names, e.g. ``PARALLELISM_CONFIG_TP_SIZE``)."""
KEY_PREFIX = "parallelism_config_"
"""Prefix of the config-file keys (Accelerate's, e.g. ``parallelism_config_tp_size``)."""

MESH_ORDER = ("dp_replicate", "dp_shard", "cp", "sp", "tp")
"""The mesh dimensions, outermost first: ranks of one ``tp`` group are neighbours."""

CP_BACKENDS = ("torch",)
"""Context-parallel backends (``torch``: ``torch.distributed.tensor.experimental.context_parallel``)."""
SP_BACKENDS = ("deepspeed",)
"""Sequence-parallel backends (``deepspeed``: ALST / Ulysses)."""
CP_COMM_STRATEGIES = ("allgather", "alltoall")
"""How context-parallel attention exchanges keys and values."""
SP_ATTN_IMPLEMENTATIONS = ("flash_attention_2", "flash_attention_3", "sdpa")
"""Built-in attention implementations accepted with DeepSpeed sequence parallelism."""


def _key(name: str, type: type | str = str, default: object = None, **kw: Any) -> Option:
    """The key ``parallelism_config_<name>``, read from ``PARALLELISM_CONFIG_<NAME>``."""
    return Option(KEY_PREFIX + name, type, default, env=ENV_PREFIX + name.upper(), **kw)


def _size(name: str, what: str) -> Option:
    return _key(name, int, 1, minimum=1, help=what, metavar="N")


OPTIONS: tuple[Option, ...] = (
    _size("dp_replicate_size", "processes holding model replicas (HSDP with dp_shard_size > 1)"),
    _size("dp_shard_size", "processes the parameters are sharded over (FSDP2)"),
    _size("tp_size", "processes each weight is split over (tensor parallelism)"),
    _size("cp_size", "processes each sequence is split over (context parallelism)"),
    _key("cp_backend", default="torch", choices=CP_BACKENDS, help="torch"),
    _key(
        "cp_comm_strategy",
        default="allgather",
        choices=CP_COMM_STRATEGIES,
        help="allgather or alltoall (context parallelism)",
    ),
    _size("sp_size", "processes each sequence is split over (DeepSpeed ALST/Ulysses)"),
    _key("sp_backend", default="deepspeed", choices=SP_BACKENDS, help="deepspeed"),
    _key("sp_seq_length", int, minimum=1, help="sequence length of every batch"),
    _key(
        "sp_seq_length_is_variable",
        bool,
        True,
        help="sequences may change length between batches",
    ),
    _key(
        "sp_attn_implementation",
        help="flash_attention_2, flash_attention_3, sdpa or a hub flash-attn kernel",
    ),
)
"""The keys of the ``parallelism_config`` section (accel-fsdp's, with its flags), each read
from its ``PARALLELISM_CONFIG_*`` variable when a field is left unset."""

_OPTION = {option.name.removeprefix(KEY_PREFIX): option for option in OPTIONS}


def _env(name: str) -> Any:
    """Field ``name`` from its ``PARALLELISM_CONFIG_*`` variable (its declared default when unset)."""
    return _OPTION[name].from_env()


@dataclass
class TorchTensorParallelConfig:
    """Options of torch-native tensor parallelism (``ParallelismConfig(tp_handler=...)``).

    ``tp_plan`` is the plan applied with DTensor's ``parallelize_module`` when the model
    brings none (a model's own ``tp_plan`` / ``_tp_plan``, as transformers models have, is
    used otherwise): ``{module path: style}``, where a path may use ``*`` for one name
    (``"blocks.*.up"``) and a style is ``"colwise"``, ``"rowwise"``, ``"colwise_rep"``,
    ``"rowwise_rep"``, ``"sequence_parallel"`` or a ``torch.distributed.tensor.parallel``
    style object. ``enable_async_tp`` is accepted for Accelerate compatibility and ignored
    (with a warning), as in Accelerate.
    """

    enable_async_tp: bool = False
    tp_plan: dict[str, object] | None = None

    def __post_init__(self) -> None:
        if self.enable_async_tp:
            warnings.warn(
                "async tensor parallelism is not supported; enable_async_tp is ignored",
                UserWarning,
                stacklevel=3,
            )
        if self.tp_plan is not None and not isinstance(self.tp_plan, dict):
            raise ConfigError(
                f"tp_plan must be a dict of module path -> style, not {type(self.tp_plan).__name__}"
            )


def _degree(size: int | None) -> int:
    """A ParallelismConfig size after ``__post_init__``, which replaced None by its value."""
    return 1 if size is None else size


@dataclass
class TorchContextParallelConfig:
    """Options of torch context parallelism (``cp_backend="torch"``).

    ``cp_comm_strategy``: ``"allgather"`` (default, from ``PARALLELISM_CONFIG_CP_COMM_STRATEGY``
    when unset) or ``"alltoall"`` - how the ring attention exchanges keys and values.
    """

    cp_comm_strategy: str | None = None

    def __post_init__(self) -> None:
        if self.cp_comm_strategy is None:
            self.cp_comm_strategy = _env("cp_comm_strategy")
        if self.cp_comm_strategy not in CP_COMM_STRATEGIES:
            raise ConfigError(
                f"cp_comm_strategy={self.cp_comm_strategy!r} is not allowed: use one of "
                f"{', '.join(CP_COMM_STRATEGIES)}"
            )


@dataclass
class DeepSpeedSequenceParallelConfig:
    """Options of DeepSpeed ALST / Ulysses sequence parallelism (``sp_backend="deepspeed"``).

    ``sp_seq_length``: the sequence length when every batch has the same one;
    ``sp_seq_length_is_variable`` (default True): sequences may change length between
    batches (then ``sp_seq_length`` may stay unset); ``sp_attn_implementation``:
    ``flash_attention_2``, ``flash_attention_3``, ``sdpa`` or a hub-hosted flash-attention
    kernel (``kernels-community/flash-attn2``). Unset fields come from
    ``PARALLELISM_CONFIG_SP_*``.
    """

    sp_seq_length: int | None = None
    sp_seq_length_is_variable: bool | None = None
    sp_attn_implementation: str | None = None

    def __post_init__(self) -> None:
        if self.sp_seq_length_is_variable is None:
            self.sp_seq_length_is_variable = _env("sp_seq_length_is_variable")
        if self.sp_seq_length is None:
            self.sp_seq_length = _env("sp_seq_length")
        if not self.sp_seq_length_is_variable and self.sp_seq_length is None:
            raise ConfigError(
                "sp_seq_length_is_variable=False needs sp_seq_length (or the environment "
                f"variable {ENV_PREFIX}SP_SEQ_LENGTH): the length of every batch's sequences"
            )
        if self.sp_attn_implementation is None:
            self.sp_attn_implementation = _env("sp_attn_implementation")
        impl = self.sp_attn_implementation
        if impl is not None:
            if impl in ("eager", "flex_attention"):
                raise ConfigError(
                    f"sp_attn_implementation={impl!r} does not work with sequence parallelism: "
                    f"use one of {', '.join(SP_ATTN_IMPLEMENTATIONS)}"
                )
            hub_kernel = "/" in impl and "flash-attn" in impl
            if impl not in SP_ATTN_IMPLEMENTATIONS and not hub_kernel:
                raise ConfigError(
                    f"sp_attn_implementation={impl!r} is not allowed: use one of "
                    f"{', '.join(SP_ATTN_IMPLEMENTATIONS)} or a hub flash-attention kernel "
                    "(kernels-community/flash-attn2)"
                )


@dataclass
class ParallelismConfig:
    """How the processes are split: data parallel (replicate x shard), tensor, context and sequence parallel.

    Args:
        dp_replicate_size: processes holding full replicas of the (sharded) model; > 1 with
            ``dp_shard_size > 1`` is HSDP. Default 1.
        dp_shard_size: processes the model's parameters are sharded over (FSDP2). Default 1.
        tp_size: processes each weight is split over by tensor parallelism. Default 1.
        cp_size: processes each sequence is split over by context parallelism. Default 1.
        cp_backend: ``"torch"`` (the only one).
        sp_size: processes each sequence is split over by DeepSpeed's sequence parallelism.
        sp_backend: ``"deepspeed"`` (ALST / Ulysses; the only one).
        tp_handler / cp_handler / sp_handler: a :class:`TorchTensorParallelConfig`,
            :class:`TorchContextParallelConfig` or :class:`DeepSpeedSequenceParallelConfig`;
            made with defaults when the matching size is > 1.

    ``dp_replicate_size > 1`` with ``dp_shard_size == 1`` is plain data parallelism (DDP);
    with tensor or context parallelism it is refused: shard as well (FSDP + TP, or HSDP + TP).
    The product of the sizes must equal the number of processes (checked when the
    Accelerator starts); with every size 1 on several processes, the processes are
    replicas (``dp_replicate_size`` becomes the world size).
    """

    dp_replicate_size: int | None = None
    dp_shard_size: int | None = None
    tp_size: int | None = None
    cp_size: int | None = None
    cp_backend: str | None = None
    sp_size: int | None = None
    sp_backend: str | None = None
    tp_handler: TorchTensorParallelConfig | None = None
    cp_handler: TorchContextParallelConfig | None = None
    sp_handler: DeepSpeedSequenceParallelConfig | None = None
    device_mesh: DeviceMesh | None = field(default=None, repr=False, compare=False)
    """The mesh built by :meth:`get_device_mesh` (None until then, or when nothing is split)."""

    def __post_init__(self) -> None:
        for name in ("dp_replicate", "dp_shard", "tp", "cp", "sp"):
            attr = f"{name}_size"
            value = getattr(self, attr)
            if value is None:
                value = _env(attr)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(f"{attr}={value!r} must be a whole number >= 1")
            if value < 1:
                raise ConfigError(f"{attr} must be at least 1, but got {value}")
            setattr(self, attr, value)
        if self.cp_backend is None:
            self.cp_backend = _env("cp_backend")
        if self.sp_backend is None:
            self.sp_backend = _env("sp_backend")
        if self.cp_backend not in CP_BACKENDS:
            raise ConfigError(
                f"cp_backend must be one of {', '.join(CP_BACKENDS)}, but got {self.cp_backend!r}"
            )
        if self.sp_backend not in SP_BACKENDS:
            raise ConfigError(
                f"sp_backend must be one of {', '.join(SP_BACKENDS)}, but got {self.sp_backend!r}"
            )
        if _degree(self.cp_size) > 1 and _degree(self.sp_size) > 1:
            raise ConfigError(
                "context parallelism (CP) and sequence parallelism (SP) are mutually exclusive: "
                f"got cp_size={self.cp_size} and sp_size={self.sp_size}; set one of them to 1"
            )
        if (
            (_degree(self.tp_size) > 1 or _degree(self.cp_size) > 1)
            and _degree(self.dp_replicate_size) > 1
            and (self.dp_shard_size == 1)
        ):
            raise ConfigError(
                "tensor/context parallelism (tp_size/cp_size > 1) cannot be combined with pure "
                f"data-parallel replication (dp_replicate_size={self.dp_replicate_size}, "
                "dp_shard_size=1): set dp_shard_size > 1 and dp_replicate_size = 1 for FSDP + TP/CP "
                "(2-D), or dp_shard_size > 1 with dp_replicate_size > 1 for HSDP + TP/CP (3-D)"
            )
        _check_handler("tp_handler", self.tp_handler, TorchTensorParallelConfig)
        _check_handler("cp_handler", self.cp_handler, TorchContextParallelConfig)
        _check_handler("sp_handler", self.sp_handler, DeepSpeedSequenceParallelConfig)
        if _degree(self.tp_size) > 1 and self.tp_handler is None:
            self.tp_handler = TorchTensorParallelConfig()
        if _degree(self.cp_size) > 1 and self.cp_handler is None:
            self.cp_handler = TorchContextParallelConfig()
        if _degree(self.sp_size) > 1 and self.sp_handler is None:
            self.sp_handler = DeepSpeedSequenceParallelConfig()

    # -- environment --------------------------------------------------------------
    @classmethod
    def from_environment(cls) -> ParallelismConfig | None:
        """The config ``accel launch`` asked for (``ACCEL_USE_PARALLELISM_CONFIG``), else None."""
        from accel.config.core_options import PROCESS_SECTION

        if PROCESS_SECTION["use_parallelism_config"].from_env():
            return cls()
        return None

    def to_json(self) -> dict[str, object]:
        """The sizes, backends and handlers' fields as plain data (no mesh)."""
        data: dict[str, object] = {}
        for name in (
            "dp_replicate_size",
            "dp_shard_size",
            "tp_size",
            "cp_size",
            "cp_backend",
            "sp_size",
            "sp_backend",
        ):
            data[name] = getattr(self, name)
        for name in ("tp_handler", "cp_handler", "sp_handler"):
            handler = getattr(self, name)
            data[name] = (
                None
                if handler is None
                else {k: v for k, v in vars(handler).items() if k != "tp_plan" or v is None}
            )
        return data

    # -- sizes ----------------------------------------------------------------------
    @property
    def _sizes(self) -> dict[str, int]:
        return {name: getattr(self, f"{name}_size") for name in MESH_ORDER}

    @property
    def total_size(self) -> int:
        """The number of processes the layout needs: the product of every size."""
        size = 1
        for value in self._sizes.values():
            size *= value
        return size

    @property
    def non_data_parallel_size(self) -> int:
        """``tp_size * cp_size * sp_size``: processes that see the same batch."""
        return _degree(self.tp_size) * _degree(self.cp_size) * _degree(self.sp_size)

    @property
    def data_parallel_size(self) -> int:
        """``dp_replicate_size * dp_shard_size``: how many different batches one step sees."""
        return _degree(self.dp_replicate_size) * _degree(self.dp_shard_size)

    @property
    def dp_replicate_enabled(self) -> bool:
        """True when ``dp_replicate_size > 1``."""
        return _degree(self.dp_replicate_size) > 1

    @property
    def dp_shard_enabled(self) -> bool:
        """True when ``dp_shard_size > 1``."""
        return _degree(self.dp_shard_size) > 1

    @property
    def tp_enabled(self) -> bool:
        """True when ``tp_size > 1``."""
        return _degree(self.tp_size) > 1

    @property
    def cp_enabled(self) -> bool:
        """True when ``cp_size > 1``."""
        return _degree(self.cp_size) > 1

    @property
    def sp_enabled(self) -> bool:
        """True when ``sp_size > 1``."""
        return _degree(self.sp_size) > 1

    # -- dimension names --------------------------------------------------------------
    def _enabled(self, *names: str) -> list[str]:
        return [name for name in names if self._sizes[name] > 1]

    @property
    def dp_dim_names(self) -> list[str]:
        """The enabled data-parallel dimensions (flattened into ``dp``)."""
        return self._enabled("dp_replicate", "dp_shard")

    @property
    def non_dp_dim_names(self) -> list[str]:
        """The enabled dimensions whose ranks receive the same batch (``tp``, ``cp``, ``sp``)."""
        return self._enabled("tp", "cp", "sp")

    @property
    def dp_shard_cp_dim_names(self) -> list[str]:
        """The enabled dimensions FSDP shards parameters over (flattened into ``dp_shard_cp``)."""
        return self._enabled("dp_shard", "cp")

    @property
    def dp_cp_dim_names(self) -> list[str]:
        """The enabled dimensions a loss is averaged over (flattened into ``dp_cp``)."""
        return self._enabled("dp_replicate", "dp_shard", "cp")

    @property
    def fsdp_dim_names(self) -> list[str]:
        """The mesh dimensions FSDP is applied over: ``dp_replicate`` (when enabled) and ``dp_shard_cp``."""
        return (["dp_replicate"] if self.dp_replicate_enabled else []) + ["dp_shard_cp"]

    @property
    def active_mesh_dims(self) -> list[str]:
        """Every enabled dimension: data-parallel ones first, then ``tp``, ``cp``, ``sp``."""
        return self.dp_dim_names + self.non_dp_dim_names

    def mesh_shape(self) -> tuple[tuple[str, ...], tuple[int, ...]]:
        """``(names, sizes)`` of the mesh, in :data:`MESH_ORDER`; empty tuples when nothing is split."""
        names = tuple(name for name in MESH_ORDER if name in self.active_mesh_dims)
        return names, tuple(self._sizes[name] for name in names)

    # -- checks ----------------------------------------------------------------------------
    def validate_world(self, num_processes: int, distributed_type: str = "") -> None:
        """Check the layout against the run: the sizes' product must equal ``num_processes``.

        All sizes 1 on several processes become ``dp_replicate_size = num_processes``
        (every process a replica). DeepSpeed's sequence parallelism builds its own groups:
        there only ``sp_size`` dividing ``num_processes`` is checked. Raises :class:`~accel.errors.ConfigError` naming the sizes.
        """
        if self.total_size == 1 and num_processes > 1:
            self.dp_replicate_size = num_processes
        if self.sp_enabled and distributed_type and str(distributed_type) != "DEEPSPEED":
            raise ConfigError(
                f"sp_size={self.sp_size} (sp_backend=deepspeed) needs DeepSpeed: launch with "
                f"--use_deepspeed (distributed type is {distributed_type})"
            )
        if self.sp_enabled and self.sp_backend == "deepspeed":
            # DeepSpeed makes its sequence-parallel groups over the whole world: blocks of sp_size
            if num_processes % _degree(self.sp_size):
                raise ConfigError(
                    f"sp_size={self.sp_size} must divide num_processes ({num_processes}): each "
                    "sequence-parallel group is sp_size consecutive processes"
                )
            return
        if self.total_size != num_processes:
            sizes = " x ".join(f"{name}_size={size}" for name, size in self._sizes.items())
            raise ConfigError(
                f"ParallelismConfig total_size ({self.total_size} = {sizes}) does not match "
                f"num_processes ({num_processes}): adjust dp_replicate_size / dp_shard_size / "
                "tp_size / cp_size / sp_size so that their product is the number of processes"
            )
        for name, size in self._sizes.items():
            if size == 1 and getattr(self, f"{name}_handler", None) is not None:
                warnings.warn(
                    f"ParallelismConfig.{name}_handler is set but {name}_size is 1: it is ignored",
                    UserWarning,
                    stacklevel=2,
                )

    # -- the mesh -----------------------------------------------------------------------------
    def build_device_mesh(self, device_type: str) -> DeviceMesh | None:
        """Build the named mesh for ``device_type`` (``"cuda"``, ``"cpu"``, ...).

        Dimensions: the enabled ones of ``dp_replicate``, ``dp_shard``, ``cp``, ``sp``, ``tp``,
        plus the flattened ``dp`` (replicate x shard), ``dp_shard_cp`` (shard x cp) and
        ``dp_cp`` (replicate x shard x cp) where their parts are enabled. None when
        nothing is split, or with DeepSpeed sequence parallelism (DeepSpeed makes its groups).
        """
        if self.sp_enabled and self.sp_backend == "deepspeed":
            return None
        names, shape = self.mesh_shape()
        if not names:
            return None
        from accel.device_mesh import build_device_mesh

        flattened = {
            "dp": self.dp_dim_names,
            "dp_shard_cp": self.dp_shard_cp_dim_names,
            "dp_cp": self.dp_cp_dim_names,
        }
        return build_device_mesh(device_type, names, shape, flattened)

    def get_device_mesh(self, device_type: str | None = None) -> DeviceMesh | None:
        """The mesh, built on first call for ``device_type``; later calls must agree on the device type."""
        if self.device_mesh is None:
            if device_type is None:
                raise ValueError("pass a device_type (e.g. 'cuda') to build the device mesh")
            self.device_mesh = self.build_device_mesh(device_type)
        elif device_type is not None and self.device_mesh.device_type != device_type:
            raise ValueError(
                f"the device mesh was built for {self.device_mesh.device_type!r}, "
                f"not {device_type!r}"
            )
        return self.device_mesh

    def __repr__(self) -> str:
        sizes = ", ".join(
            f"{name}={getattr(self, name)}"
            for name in (
                "dp_replicate_size",
                "dp_shard_size",
                "tp_size",
                "cp_size",
                "cp_backend",
                "sp_size",
                "sp_backend",
            )
        )
        return f"ParallelismConfig({sizes}, total_size={self.total_size})"


def needs_nd_backend(config: ParallelismConfig) -> bool:
    """Whether ``config`` shards parameters or splits them (FSDP2 / TP / CP): the FSDP plugin's job."""
    return config.dp_shard_enabled or config.tp_enabled or config.cp_enabled


def _check_handler(name: str, handler: object, kind: type) -> None:
    if handler is not None and not isinstance(handler, kind):
        raise ConfigError(f"{name} must be a {kind.__name__}, not {type(handler).__name__}")


__all__ = [
    "DeepSpeedSequenceParallelConfig",
    "ParallelismConfig",
    "TorchContextParallelConfig",
    "TorchTensorParallelConfig",
]
