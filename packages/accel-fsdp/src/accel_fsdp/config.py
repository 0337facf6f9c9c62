"""``FullyShardedDataParallelPlugin``: every FSDP setting, from code, the ``fsdp_config`` section or flags.

Torch-free: values are validated and normalised here (names or the seed's
numbers); torch objects are built by the backend.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from accel.errors import ConfigError
from accel.utils.config_keys import parse_bool as _bool

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


def _choice(key: str, value: Any, allowed: tuple[str, ...], numbered: bool = False) -> str:
    if hasattr(value, "name") and not isinstance(value, str):  # a torch enum member
        value = value.name
    text = str(value).strip().upper()
    if numbered and text.isdigit() and 1 <= int(text) <= len(allowed):
        return allowed[int(text) - 1]
    if text not in allowed:
        extra = " (or 1-5)" if numbered else ""
        raise ConfigError(f"{key}={value!r} is not allowed: use one of {', '.join(allowed)}{extra}")
    return text


def _int(key: str, value: Any) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{key}={value!r} is not an integer") from None
    if number < 0:
        raise ConfigError(f"{key}={value!r} must be >= 0")
    return number


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
        section = _launched_section()
        for f in fields(self):
            if getattr(self, f.name) is None:
                for key in _config_keys(f.name):
                    if key in section:
                        setattr(self, f.name, section[key])
                        break
        self.fsdp_version = (
            2 if self.fsdp_version is None else _int("fsdp_version", self.fsdp_version)
        )
        if self.fsdp_version not in (1, 2):
            raise ConfigError(f"fsdp_version={self.fsdp_version}: use 1 or 2")
        if (
            self.sharding_strategy is None
            and self.reshard_after_forward is not None
            and self.fsdp_version == 2
        ):
            value = self.reshard_after_forward
            if isinstance(value, str) and value.strip().upper() in SHARDING_STRATEGIES:
                self.sharding_strategy = value
            else:
                self.sharding_strategy = (
                    "FULL_SHARD" if _bool("reshard_after_forward", value) else "SHARD_GRAD_OP"
                )
        self.sharding_strategy = _choice(
            "sharding_strategy",
            self.sharding_strategy or "FULL_SHARD",
            SHARDING_STRATEGIES,
            numbered=True,
        )
        self.reshard_after_forward = self.sharding_strategy in ("FULL_SHARD", "HYBRID_SHARD")
        if self.backward_prefetch is not None and not callable(self.backward_prefetch):
            self.backward_prefetch = _choice(
                "backward_prefetch", self.backward_prefetch, BACKWARD_PREFETCH
            )
        if self.auto_wrap_policy is not None and not callable(self.auto_wrap_policy):
            self.auto_wrap_policy = _choice(
                "auto_wrap_policy", self.auto_wrap_policy, AUTO_WRAP_POLICIES
            )
        self.state_dict_type = _choice(
            "state_dict_type", self.state_dict_type or "FULL_STATE_DICT", STATE_DICT_TYPES
        )
        if self.state_dict_type == "LOCAL_STATE_DICT" and self.fsdp_version == 2:
            raise ConfigError(
                "state_dict_type=LOCAL_STATE_DICT exists only for fsdp_version 1: use SHARDED_STATE_DICT with FSDP2"
            )
        if isinstance(self.transformer_cls_names_to_wrap, str):
            self.transformer_cls_names_to_wrap = [
                n.strip() for n in self.transformer_cls_names_to_wrap.split(",") if n.strip()
            ]
        if self.min_num_params is not None:
            self.min_num_params = _int("min_num_params", self.min_num_params)
        for name in (
            "use_orig_params",
            "sync_module_states",
            "forward_prefetch",
            "activation_checkpointing",
            "cpu_ram_efficient_loading",
        ):
            value = getattr(self, name)
            setattr(
                self,
                name,
                False
                if value is None and name != "use_orig_params"
                else (True if value is None else _bool(name, value)),
            )
        if self.cpu_offload is not None and not hasattr(self.cpu_offload, "offload_params"):
            self.cpu_offload = _bool("offload_params", self.cpu_offload)
        if self.cpu_ram_efficient_loading:
            self.sync_module_states = True

    @property
    def offload_params(self) -> bool:
        """Whether parameters live on the CPU between uses."""
        value = self.cpu_offload
        return bool(getattr(value, "offload_params", value))


def _config_keys(name: str) -> list[str]:
    aliases = {
        "cpu_offload": ["fsdp_offload_params"],
        "transformer_cls_names_to_wrap": ["fsdp_transformer_layer_cls_to_wrap"],
    }
    return aliases.get(name, []) + [f"fsdp_{name}"]


def _launched_section() -> Mapping[str, Any]:
    from accel.utils.config import launched_config

    return launched_config().get("fsdp_config") or {}


FSDP_CONFIG_KEYS: dict[str, str] = {
    "fsdp_version": "1 or 2",
    "fsdp_sharding_strategy": "FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD, HYBRID_SHARD_ZERO2 or 1-5",
    "fsdp_reshard_after_forward": "true/false or a sharding strategy",
    "fsdp_auto_wrap_policy": "TRANSFORMER_BASED_WRAP, SIZE_BASED_WRAP or NO_WRAP",
    "fsdp_transformer_layer_cls_to_wrap": "comma-separated class names",
    "fsdp_min_num_params": "an integer",
    "fsdp_backward_prefetch": "BACKWARD_PRE, BACKWARD_POST or NO_PREFETCH",
    "fsdp_backward_prefetch_policy": "BACKWARD_PRE, BACKWARD_POST or NO_PREFETCH",
    "fsdp_forward_prefetch": "true/false",
    "fsdp_offload_params": "true/false",
    "fsdp_state_dict_type": "FULL_STATE_DICT, SHARDED_STATE_DICT or LOCAL_STATE_DICT",
    "fsdp_use_orig_params": "true/false",
    "fsdp_sync_module_states": "true/false",
    "fsdp_cpu_ram_efficient_loading": "true/false",
    "fsdp_activation_checkpointing": "true/false",
}
"""The keys of the ``fsdp_config`` section and what each accepts."""


def validate_section(section: Mapping[str, Any]) -> list[str]:
    """Errors in an ``fsdp_config`` section (unknown keys, bad values), one line each."""
    errors: list[str] = []
    if not isinstance(section, Mapping):
        return [f"fsdp_config must be a mapping of fsdp_* keys, not {type(section).__name__}"]
    for key, value in section.items():
        if key not in FSDP_CONFIG_KEYS:
            errors.append(
                f"fsdp_config.{key} is not an FSDP setting: allowed keys are {', '.join(FSDP_CONFIG_KEYS)}"
            )
            continue
        name = (
            "backward_prefetch"
            if key == "fsdp_backward_prefetch_policy"
            else key.removeprefix("fsdp_")
        )
        try:
            _check_value(name, value)
        except ConfigError as error:
            errors.append(f"fsdp_config.{key}: {error}")
    return errors


def _check_value(name: str, value: Any) -> None:
    if name == "version" and _int(name, value) not in (1, 2):
        raise ConfigError(f"{value!r}: use 1 or 2")
    checks: dict[str, Callable[[Any], Any]] = {
        "sharding_strategy": lambda v: _choice(name, v, SHARDING_STRATEGIES, numbered=True),
        "auto_wrap_policy": lambda v: _choice(name, v, AUTO_WRAP_POLICIES),
        "backward_prefetch": lambda v: _choice(name, v, BACKWARD_PREFETCH),
        "state_dict_type": lambda v: _choice(name, v, STATE_DICT_TYPES),
        "min_num_params": lambda v: _int(name, v),
        "transformer_layer_cls_to_wrap": lambda v: v,
        "reshard_after_forward": lambda v: (
            v if str(v).upper() in SHARDING_STRATEGIES else _bool(name, v)
        ),
    }
    checks.get(name, lambda v: _bool(name, v) if name != "version" else v)(value)
