"""``FullyShardedDataParallelPlugin``: every FSDP setting, from code, the ``fsdp_config`` section or flags.

Torch-free: values are validated and normalised here (names or the seed's
numbers); torch objects are built by the backend. The section's keys are declared once
in :data:`FSDP_SECTION`, which validates config files, makes the ``accel launch
--fsdp_*`` flags and reads the launched section in the workers.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from accel.catalog import FSDP_SHARDING_STRATEGIES
from accel.config.core_options import parse_bool
from accel.config.options import Option, Section
from accel.config.strategy import Strategy
from accel.errors import ConfigError

if TYPE_CHECKING:
    import torch
    from torch.distributed.fsdp import (
        BackwardPrefetch,
        CPUOffload,
        CPUOffloadPolicy,
        MixedPrecision,
        MixedPrecisionPolicy,
        ShardingStrategy,
        StateDictType,
    )

SHARDING_STRATEGIES = tuple(FSDP_SHARDING_STRATEGIES)
"""Sharding strategies (the catalog's); the config may also give their numbers 1-5."""
AUTO_WRAP_POLICIES = ("TRANSFORMER_BASED_WRAP", "SIZE_BASED_WRAP", "NO_WRAP")
"""Auto-wrap policies (``fsdp_auto_wrap_policy``)."""
BACKWARD_PREFETCH = ("BACKWARD_PRE", "BACKWARD_POST", "NO_PREFETCH")
"""Backward prefetch settings (FSDP1)."""
STATE_DICT_TYPES = ("FULL_STATE_DICT", "LOCAL_STATE_DICT", "SHARDED_STATE_DICT")
"""Checkpoint state dict types, in the order of torch's ``StateDictType`` (1-3)."""
RAM_EFFICIENT_LOADING_ENV = "FSDP_CPU_RAM_EFFICIENT_LOADING"
"""Read by transformers' ``from_pretrained`` (with ``ACCELERATE_USE_FSDP``): only the main
process loads the weights, the others get empty ones that FSDP fills from it."""


USE_FSDP_ENV = "ACCELERATE_USE_FSDP"
"""transformers' sign that FSDP is on (its ``is_fsdp_enabled``): read with
:data:`RAM_EFFICIENT_LOADING_ENV`; it never reads accel's own variables."""


def enable_fsdp_ram_efficient_loading() -> None:
    """Make transformers' ``from_pretrained`` load weights on the main process only (the
    others get empty ones, which FSDP fills from it): sets ``FSDP_CPU_RAM_EFFICIENT_LOADING``,
    and ``ACCELERATE_USE_FSDP`` unless already set, as Accelerate does."""
    os.environ.setdefault(USE_FSDP_ENV, "True")
    os.environ[RAM_EFFICIENT_LOADING_ENV] = "True"


def disable_fsdp_ram_efficient_loading() -> None:
    """Every process loads the full weights in ``from_pretrained`` again."""
    os.environ[RAM_EFFICIENT_LOADING_ENV] = "False"


def _dtype_of(value: str | torch.dtype) -> torch.dtype:
    """The torch dtype of a precision name (``"bf16"``, ``"fp8"``: its precision's ``dtype``, see
    :func:`accel.precision.dtype_of`) or of a dtype; ValueError unless float16, bfloat16 or float32."""
    import torch
    from accel.precision import dtype_of

    try:
        dtype = dtype_of(value)
    except ValueError:
        dtype = None
    if dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise ValueError(
            f"Invalid mixed precision: {value!r}. Must be one of fp16, bf16, fp8, fp32 "
            "or torch.float16, torch.bfloat16, torch.float32"
        )
    return dtype


def _reshard(value: object, label: str) -> str | bool:
    """``reshard_after_forward``: a boolean, or (FSDP1 style) a sharding strategy name."""
    if isinstance(value, str) and value.strip().upper() in SHARDING_STRATEGIES:
        return value.strip().upper()
    return parse_bool(label, value)


FSDP_SECTION = Section(
    "fsdp_config",
    [
        Option("fsdp_version", int, 2, choices=(1, 2), help="1 or 2"),
        Option(
            "fsdp_sharding_strategy",
            default="FULL_SHARD",
            choices=SHARDING_STRATEGIES,
            numbered=True,
            help="how parameters, gradients and optimizer states are sharded (or 1-5)",
        ),
        Option(
            "fsdp_reshard_after_forward",
            bool,
            reader=_reshard,
            allowed="true, false or a sharding strategy",
            help="true/false or a sharding strategy",
        ),
        Option("fsdp_auto_wrap_policy", choices=AUTO_WRAP_POLICIES, help="how modules are wrapped"),
        Option(
            "fsdp_transformer_layer_cls_to_wrap",
            list,
            help="comma-separated class names",
        ),
        Option("fsdp_min_num_params", int, minimum=0, help="an integer"),
        Option(
            "fsdp_backward_prefetch",
            choices=BACKWARD_PREFETCH,
            aliases=("fsdp_backward_prefetch_policy",),
            flag_aliases=("fsdp_backward_prefetch_policy",),
            help="when the next parameters are fetched in backward (FSDP1)",
        ),
        Option("fsdp_forward_prefetch", bool, False, help="true/false"),
        Option("fsdp_offload_params", bool, False, help="true/false"),
        Option(
            "fsdp_state_dict_type",
            default="FULL_STATE_DICT",
            choices=STATE_DICT_TYPES,
            help="how checkpoints hold the weights",
        ),
        Option("fsdp_use_orig_params", bool, True, help="true/false"),
        Option("fsdp_sync_module_states", bool, False, help="true/false"),
        Option("fsdp_cpu_ram_efficient_loading", bool, False, help="true/false"),
        Option("fsdp_activation_checkpointing", bool, False, help="true/false"),
        Option(
            "fsdp_ignored_modules",
            str,
            flag=None,
            help="a regular expression: modules whose name matches it in full stay unsharded",
        ),
    ],
    title="FSDP",
)
"""The ``fsdp_config`` section: its keys, types, defaults and flags (``--fsdp_*``)."""

FSDP_STRATEGY = Strategy(
    FSDP_SECTION,
    "use_fsdp",
    help="train with Fully Sharded Data Parallel (accel-fsdp)",
    question="Do you want to use FullyShardedDataParallel (FSDP)?",
)
"""``--use_fsdp`` and the ``accel config`` question that choose FSDP."""

FSDP_CONFIG_KEYS: dict[str, str] = {option.name: option.help for option in FSDP_SECTION}
"""The keys of the ``fsdp_config`` section and what each accepts."""

validate_section = FSDP_SECTION.validate
"""Errors in an ``fsdp_config`` section (unknown keys, bad values), one line each."""

_FIELD_KEYS = {
    "cpu_offload": "fsdp_offload_params",
    "transformer_cls_names_to_wrap": "fsdp_transformer_layer_cls_to_wrap",
}
"""Plugin fields whose section key is not ``fsdp_<field>``."""


def _key(name: str) -> str:
    return _FIELD_KEYS.get(name, name if name.startswith("fsdp_") else f"fsdp_{name}")


def _convert(name: str, value: Any) -> Any:
    """A field's value through its declared key (errors name the field)."""
    return FSDP_SECTION[_key(name)].convert(value, name)


@dataclass
class FullyShardedDataParallelPlugin:
    """How a model is sharded with FSDP.

    Unset fields come from the ``fsdp_config`` section chosen by ``accel launch``
    (keys ``fsdp_<field>``), else the defaults: FSDP2, FULL_SHARD, no auto-wrap
    beyond the model's ``_no_split_modules``, FULL_STATE_DICT checkpoints.
    """

    fsdp_version: int | None = None
    sharding_strategy: str | int | ShardingStrategy | None = None
    reshard_after_forward: bool | str | int | None = None
    backward_prefetch: str | BackwardPrefetch | None = None
    mixed_precision_policy: (
        MixedPrecisionPolicy | MixedPrecision | dict[str, str | torch.dtype] | str | None
    ) = None
    auto_wrap_policy: str | Callable[..., bool] | None = None
    cpu_offload: bool | CPUOffload | CPUOffloadPolicy | None = None
    ignored_modules: Iterable[torch.nn.Module] | str | None = None
    state_dict_type: str | int | StateDictType | None = None
    state_dict_config: object = None
    """torch's ``StateDictConfig`` (accepted for Accelerate's signature)."""
    optim_state_dict_config: object = None
    """torch's ``OptimStateDictConfig`` (accepted for Accelerate's signature)."""
    limit_all_gathers: bool = True
    use_orig_params: bool | None = None
    param_init_fn: Callable | None = None
    sync_module_states: bool | None = None
    forward_prefetch: bool | None = None
    activation_checkpointing: bool | None = None
    cpu_ram_efficient_loading: bool | None = None
    transformer_cls_names_to_wrap: list[str] | None = None
    min_num_params: int | None = None
    extra: dict[str, object] = field(default_factory=dict, repr=False)

    def __post_init__(self):
        section = FSDP_SECTION.read(defaults=False)  # the keys the launched config sets
        given = {f.name for f in fields(self) if getattr(self, f.name) is not None}
        for f in fields(self):
            if getattr(self, f.name) is None and _key(f.name) in section:
                setattr(self, f.name, section[_key(f.name)])
        self.fsdp_version = _convert("fsdp_version", self.fsdp_version) or 2
        if self.sharding_strategy is None and self.reshard_after_forward is not None:
            # FSDP2's boolean, or (FSDP1, as transformers' TrainingArguments passes it) a
            # sharding strategy name in any case: "full_shard", "SHARD_GRAD_OP", ...
            value = _convert("reshard_after_forward", self.reshard_after_forward)
            if isinstance(value, str):
                self.sharding_strategy = value
            else:
                self.sharding_strategy = "FULL_SHARD" if value else "SHARD_GRAD_OP"
        self.sharding_strategy = _convert(
            "sharding_strategy", self.sharding_strategy or "FULL_SHARD"
        )
        self.reshard_after_forward = FSDP_SHARDING_STRATEGIES[self.sharding_strategy]
        if self.backward_prefetch is not None and not callable(self.backward_prefetch):
            self.backward_prefetch = _convert("backward_prefetch", self.backward_prefetch)
        if self.auto_wrap_policy is not None and not callable(self.auto_wrap_policy):
            self.auto_wrap_policy = _convert("auto_wrap_policy", self.auto_wrap_policy)
        self.set_state_dict_type(self.state_dict_type or "FULL_STATE_DICT")
        self.transformer_cls_names_to_wrap = _convert(
            "transformer_cls_names_to_wrap", self.transformer_cls_names_to_wrap
        )
        self.min_num_params = _convert("min_num_params", self.min_num_params)
        for name in (
            "use_orig_params",
            "sync_module_states",
            "forward_prefetch",
            "activation_checkpointing",
            "cpu_ram_efficient_loading",
        ):
            value = _convert(name, getattr(self, name))
            setattr(self, name, FSDP_SECTION[_key(name)].default if value is None else value)
        if self.cpu_offload is not None and not hasattr(self.cpu_offload, "offload_params"):
            self.cpu_offload = FSDP_SECTION["fsdp_offload_params"].convert(
                self.cpu_offload, "offload_params"
            )
        if self.cpu_ram_efficient_loading:
            self.sync_module_states = True
        if isinstance(self.mixed_precision_policy, str):  # "bf16": the torch policy, as Accelerate
            self.set_mixed_precision(self.mixed_precision_policy, override=True)
        if _key("cpu_ram_efficient_loading") in section or "cpu_ram_efficient_loading" in given:
            # transformers' from_pretrained reads this variable (with ACCELERATE_USE_FSDP)
            # to load the weights on the main process only, as Accelerate's plugin sets it
            os.environ[RAM_EFFICIENT_LOADING_ENV] = str(bool(self.cpu_ram_efficient_loading))

    def set_state_dict_type(self, state_dict_type: str | int | StateDictType | None = None) -> None:
        """Choose how checkpoints are written: ``FULL_STATE_DICT``, ``SHARDED_STATE_DICT`` or
        ``LOCAL_STATE_DICT`` (FSDP1 only); a name in any case, its number 1-3 or torch's
        ``StateDictType``. Without an argument the current value is checked again.

        As in Accelerate, e.g. train with sharded checkpoints, then
        ``set_state_dict_type("FULL_STATE_DICT")`` before saving the final model.
        """
        value = self.state_dict_type if state_dict_type is None else state_dict_type
        value = getattr(value, "name", value)  # torch.distributed.fsdp.StateDictType
        if isinstance(value, int) or (isinstance(value, str) and value.strip().isdigit()):
            number = int(value)
            if not 1 <= number <= len(STATE_DICT_TYPES):
                raise ConfigError(
                    f"state_dict_type={value!r}: use 1-{len(STATE_DICT_TYPES)} or one of {', '.join(STATE_DICT_TYPES)}"
                )
            value = STATE_DICT_TYPES[number - 1]
        if isinstance(value, str):
            value = value.strip().upper()
        value = _convert("state_dict_type", value)
        if value == "LOCAL_STATE_DICT" and self.fsdp_version == 2:
            raise ConfigError(
                "state_dict_type=LOCAL_STATE_DICT exists only for fsdp_version 1: use SHARDED_STATE_DICT with FSDP2"
            )
        self.state_dict_type = value

    def set_mixed_precision(
        self,
        mixed_precision: str | torch.dtype,
        buffer_autocast: bool = False,
        override: bool = False,
    ) -> None:
        """Set ``mixed_precision_policy`` from a precision, as Accelerate's plugin does.

        ``mixed_precision`` is ``"fp16"``, ``"bf16"``, ``"fp32"``, ``"fp8"`` (bf16 outside the
        FP8 layers) or one of those torch dtypes. When no policy is set yet, or with
        ``override``, the policy becomes torch's ``MixedPrecisionPolicy(param_dtype, reduce_dtype,
        output_dtype)`` for FSDP2 or ``MixedPrecision(param_dtype, reduce_dtype, buffer_dtype)``
        for FSDP1, all in that dtype (buffers in float32 with ``buffer_autocast``). A policy
        given as a dict (dtypes or precision names by field) becomes that torch object; an
        existing policy object is kept unless ``override``. Transformers calls this for QLoRA
        (``set_mixed_precision(quant_storage_dtype, override=True)``).
        """
        import torch
        from torch.distributed.fsdp import MixedPrecision, MixedPrecisionPolicy

        dtype = _dtype_of(mixed_precision)
        if override or self.mixed_precision_policy is None:
            self.mixed_precision_policy = (
                MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=dtype, output_dtype=dtype)
                if self.fsdp_version == 2
                else MixedPrecision(
                    param_dtype=dtype,
                    reduce_dtype=dtype,
                    buffer_dtype=torch.float32 if buffer_autocast else dtype,
                )
            )
        elif isinstance(self.mixed_precision_policy, dict):
            allowed = {"param_dtype", "reduce_dtype"} | (
                {"output_dtype"} if self.fsdp_version == 2 else {"buffer_dtype"}
            )
            unknown = sorted(set(self.mixed_precision_policy) - allowed)
            if unknown:
                raise ValueError(
                    f"mixed_precision_policy has unknown keys {unknown}: FSDP{self.fsdp_version} "
                    f"takes {sorted(allowed)}"
                )
            dtypes = {key: _dtype_of(value) for key, value in self.mixed_precision_policy.items()}
            param, reduce = dtypes.get("param_dtype"), dtypes.get("reduce_dtype")
            self.mixed_precision_policy = (
                MixedPrecisionPolicy(param, reduce, dtypes.get("output_dtype"))
                if self.fsdp_version == 2
                else MixedPrecision(param, reduce, dtypes.get("buffer_dtype"))
            )

    def set_auto_wrap_policy(self, model: torch.nn.Module) -> None:
        """Turn a named ``auto_wrap_policy`` into torch's policy callable for ``model``, as Accelerate does.

        ``TRANSFORMER_BASED_WRAP`` becomes ``functools.partial(transformer_auto_wrap_policy,
        transformer_layer_cls=...)`` with the classes named by ``transformer_cls_names_to_wrap``
        (by default the model's ``_no_split_modules``, which then fills that field); a name the
        model does not contain raises ``ValueError``. ``SIZE_BASED_WRAP`` becomes
        ``functools.partial(size_based_auto_wrap_policy, min_num_params=...)``, or None when
        ``min_num_params`` is unset or 0. Other values (None, ``NO_WRAP``, a callable) are kept.
        The backend accepts either form.
        """
        import functools

        from torch.distributed.fsdp.wrap import (
            size_based_auto_wrap_policy,
            transformer_auto_wrap_policy,
        )

        if self.auto_wrap_policy == "TRANSFORMER_BASED_WRAP":
            if self.transformer_cls_names_to_wrap is None:
                self.transformer_cls_names_to_wrap = list(
                    getattr(model, "_no_split_modules", None) or []
                )
            by_name = {type(m).__name__: type(m) for m in model.modules()}
            classes = set()
            for name in self.transformer_cls_names_to_wrap:
                if name not in by_name:
                    raise ValueError(
                        f"Could not find the transformer layer class {name} in the model "
                        "(fsdp_transformer_layer_cls_to_wrap names classes of its submodules)"
                    )
                classes.add(by_name[name])
            self.auto_wrap_policy = functools.partial(
                transformer_auto_wrap_policy, transformer_layer_cls=classes
            )
        elif self.auto_wrap_policy == "SIZE_BASED_WRAP":
            self.auto_wrap_policy = (
                functools.partial(size_based_auto_wrap_policy, min_num_params=self.min_num_params)
                if self.min_num_params
                else None
            )

    @property
    def offload_params(self) -> bool:
        """Whether parameters live on the CPU between uses."""
        value = self.cpu_offload
        return bool(getattr(value, "offload_params", value))
