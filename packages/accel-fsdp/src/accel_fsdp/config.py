"""``FullyShardedDataParallelPlugin``: every FSDP setting, from code, the ``fsdp_config`` section or flags.

Torch-free: values are validated and normalised here (names or the seed's
numbers); torch objects are built by the backend. The section's keys are declared once
in :data:`FSDP_SECTION`, which validates config files, makes the ``accel launch
--fsdp_*`` flags and reads the launched section in the workers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

from accel.config.keys import parse_bool
from accel.config.sections import Option, Section
from accel.errors import ConfigError

SHARDING_STRATEGIES = (
    "FULL_SHARD",
    "SHARD_GRAD_OP",
    "NO_SHARD",
    "HYBRID_SHARD",
    "HYBRID_SHARD_ZERO2",
)
"""Sharding strategies; the config may also give their numbers 1-5."""
AUTO_WRAP_POLICIES = ("TRANSFORMER_BASED_WRAP", "SIZE_BASED_WRAP", "NO_WRAP")
BACKWARD_PREFETCH = ("BACKWARD_PRE", "BACKWARD_POST", "NO_PREFETCH")
STATE_DICT_TYPES = ("FULL_STATE_DICT", "SHARDED_STATE_DICT", "LOCAL_STATE_DICT")


def _reshard(value: Any, label: str) -> Any:
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
            help="FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD, HYBRID_SHARD_ZERO2 or 1-5",
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
            help="BACKWARD_PRE, BACKWARD_POST or NO_PREFETCH",
        ),
        Option("fsdp_forward_prefetch", bool, False, help="true/false"),
        Option("fsdp_offload_params", bool, False, help="true/false"),
        Option(
            "fsdp_state_dict_type",
            default="FULL_STATE_DICT",
            choices=STATE_DICT_TYPES,
            help="FULL_STATE_DICT, SHARDED_STATE_DICT or LOCAL_STATE_DICT",
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
    distributed_type="FSDP",
)
"""The ``fsdp_config`` section: its keys, types, defaults and flags (``--fsdp_*``)."""

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
    sharding_strategy: Any = None
    reshard_after_forward: Any = None
    backward_prefetch: Any = None
    mixed_precision_policy: Any = None
    auto_wrap_policy: Any = None
    cpu_offload: Any = None
    ignored_modules: Any = None
    state_dict_type: Any = None
    state_dict_config: Any = None
    optim_state_dict_config: Any = None
    limit_all_gathers: bool = True
    use_orig_params: bool | None = None
    param_init_fn: Callable | None = None
    sync_module_states: bool | None = None
    forward_prefetch: bool | None = None
    activation_checkpointing: bool | None = None
    cpu_ram_efficient_loading: bool | None = None
    transformer_cls_names_to_wrap: list[str] | None = None
    min_num_params: int | None = None
    extra: dict[str, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self):
        section = FSDP_SECTION.read(defaults=False)  # the keys the launched config sets
        for f in fields(self):
            if getattr(self, f.name) is None and _key(f.name) in section:
                setattr(self, f.name, section[_key(f.name)])
        self.fsdp_version = _convert("fsdp_version", self.fsdp_version) or 2
        if (
            self.sharding_strategy is None
            and self.reshard_after_forward is not None
            and self.fsdp_version == 2
        ):
            value = _convert("reshard_after_forward", self.reshard_after_forward)
            if isinstance(value, str):
                self.sharding_strategy = value
            else:
                self.sharding_strategy = "FULL_SHARD" if value else "SHARD_GRAD_OP"
        self.sharding_strategy = _convert(
            "sharding_strategy", self.sharding_strategy or "FULL_SHARD"
        )
        self.reshard_after_forward = self.sharding_strategy in ("FULL_SHARD", "HYBRID_SHARD")
        if self.backward_prefetch is not None and not callable(self.backward_prefetch):
            self.backward_prefetch = _convert("backward_prefetch", self.backward_prefetch)
        if self.auto_wrap_policy is not None and not callable(self.auto_wrap_policy):
            self.auto_wrap_policy = _convert("auto_wrap_policy", self.auto_wrap_policy)
        self.state_dict_type = _convert(
            "state_dict_type", self.state_dict_type or "FULL_STATE_DICT"
        )
        if self.state_dict_type == "LOCAL_STATE_DICT" and self.fsdp_version == 2:
            raise ConfigError(
                "state_dict_type=LOCAL_STATE_DICT exists only for fsdp_version 1: use SHARDED_STATE_DICT with FSDP2"
            )
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

    def set_auto_wrap_policy(self, model: Any) -> None:
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
