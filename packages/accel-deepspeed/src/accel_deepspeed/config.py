"""``DeepSpeedPlugin``: every DeepSpeed setting, from code, the ``deepspeed_config`` section or flags.

Torch-free. The plugin turns its fields (or a DeepSpeed JSON config file) into one
DeepSpeed config dict, :attr:`DeepSpeedPlugin.deepspeed_config`, whose ``"auto"``
values are filled at ``prepare`` time by :mod:`accel_deepspeed.auto`.
"""

from __future__ import annotations

import contextlib
import copy
import sys
import warnings
from collections.abc import Generator
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, cast

from accel.config.core_options import parse_bool
from accel.errors import ConfigError

from .hf_config import DeepSpeedConfig, HfDeepSpeedConfig, JSONValue
from .options import (  # the declarations, in a module `accel launch` imports alone
    DEEPSPEED_SECTION,
    DEEPSPEED_STRATEGY,  # noqa: F401 - its public path stays accel_deepspeed.config
    MULTINODE_LAUNCHERS,  # noqa: F401
    OFFLOAD_DEVICES,  # noqa: F401
    _clip,
    _stage,
    check_combination,
    ignored_param_offload,
)

SECTION_KEYS: dict[str, str] = {option.name: option.help for option in DEEPSPEED_SECTION}
"""The keys of the ``deepspeed_config`` section and what each accepts."""

validate_section = DEEPSPEED_SECTION.validate
"""Errors in a ``deepspeed_config`` section (unknown keys, bad values, offload against the
ZeRO stage), one line each."""

if TYPE_CHECKING:
    import os
    from collections.abc import Callable

    import torch
    from accel.backends import BackendContext
    from accel.precision import Precision

_FIELD_OF_KEY = {
    "deepspeed_config_file": "hf_ds_config",
    "deepspeed_moe_layer_cls_names": "transformer_moe_cls_names",
}


def _device(key: str, value: object) -> str:
    """An offload device (``none`` when unset); errors name ``key``."""
    return DEEPSPEED_SECTION["offload_param_device"].convert(
        "none" if value is None else value, key
    )


def _warn_ignored_param_offload(stage: int | str, param_device: str) -> None:
    """Warn (not refuse, as Accelerate accepts it) when DeepSpeed will ignore ``offload_param``."""
    message = ignored_param_offload(stage, param_device)
    if message is not None:
        warnings.warn(message, UserWarning, stacklevel=4)


def _steps(key: str, value: object) -> int | str:
    return DEEPSPEED_SECTION["gradient_accumulation_steps"].convert(value, key)


@dataclass
class DeepSpeedPlugin:
    """How a model is trained with DeepSpeed.

    Either give a DeepSpeed config (``hf_ds_config``: a dict, a JSON path, or a
    :class:`HfDeepSpeedConfig`; the YAML key is ``deepspeed_config_file``) or the
    simple fields below, from which a config is built. Unset fields come from the
    ``deepspeed_config`` section chosen by ``accel launch``, else the defaults
    (ZeRO-2, no offload). ``"auto"`` values are filled from the Accelerator and
    the prepared objects when :meth:`~accel.Accelerator.prepare` runs.
    """

    hf_ds_config: HfDeepSpeedConfig | DeepSpeedConfig | str | os.PathLike[str] | None = None
    """A DeepSpeed config: dict, path of a JSON file, JSON text, or :class:`HfDeepSpeedConfig`.
    An :class:`HfDeepSpeedConfig` (such as transformers' ``HfTrainerDeepSpeedConfig``) is kept
    as it is, and :attr:`deepspeed_config` is its very ``config`` dict; others are wrapped in one."""
    gradient_accumulation_steps: int | str | None = None
    """Micro-batches per optimizer step (default: the Accelerator's)."""
    gradient_clipping: float | str | None = None
    """Clip gradients to this norm (default: 1.0 where the config says ``auto``)."""
    zero_stage: int | None = None
    """0 (off), 1, 2 or 3 (default 2)."""
    is_train_batch_min: bool = True
    """Whether ``train_batch_size`` follows from the micro-batch (not the other way round)."""
    offload_optimizer_device: str | None = None
    """none, cpu or nvme."""
    offload_param_device: str | None = None
    """none, cpu or nvme (ZeRO-3 only)."""
    offload_optimizer_nvme_path: str | None = None
    """NVMe directory for optimizer states."""
    offload_param_nvme_path: str | None = None
    """NVMe directory for parameters."""
    zero3_init_flag: bool | None = None
    """Build models under ``deepspeed.zero.Init`` (see :meth:`zero3_init_context_manager`)."""
    zero3_save_16bit_model: bool | None = None
    """With ZeRO-3, gather the 16-bit weights into one state dict when saving."""
    transformer_moe_cls_names: str | list[str] | None = None
    """Mixture-of-Experts layer classes kept whole as ZeRO-3 leaf modules."""
    config_sources: dict[str, str] = field(default_factory=dict, repr=False)
    """Where each field's value came from (``code``, ``deepspeed_config section``, ``default``)."""

    def __post_init__(self):
        section = DEEPSPEED_SECTION.read(defaults=False)  # the keys the launched config sets
        for f in fields(self):
            if f.name == "config_sources":
                continue
            if getattr(self, f.name) is not None:
                self.config_sources[f.name] = "code"
                continue
            key = next((k for k, v in _FIELD_OF_KEY.items() if v == f.name), f.name)
            if section.get(key) is not None:
                setattr(self, f.name, section[key])
                self.config_sources[f.name] = "deepspeed_config section"
        if self.hf_ds_config is not None and not isinstance(self.hf_ds_config, HfDeepSpeedConfig):
            self.hf_ds_config = HfDeepSpeedConfig(self.hf_ds_config)
        if self.gradient_accumulation_steps is not None:
            self.gradient_accumulation_steps = _steps(
                "gradient_accumulation_steps", self.gradient_accumulation_steps
            )
        self.gradient_clipping = _clip(self.gradient_clipping)
        self.transformer_moe_cls_names = DEEPSPEED_SECTION["deepspeed_moe_layer_cls_names"].convert(
            self.transformer_moe_cls_names, "transformer_moe_cls_names"
        )
        for name in ("zero3_init_flag", "zero3_save_16bit_model"):
            value = DEEPSPEED_SECTION[name].convert(getattr(self, name), name)
            setattr(self, name, False if value is None else value)
        if self.hf_ds_config is not None:
            self._from_file()  # completes hf_ds_config.config in place
        else:
            self.hf_ds_config = HfDeepSpeedConfig(self._from_fields())
        # One dict, shared with hf_ds_config (which may be transformers' HfTrainerDeepSpeedConfig):
        # the "auto" values the Trainer fills there are the ones the engine is built from.
        self.deepspeed_config: DeepSpeedConfig = self.hf_ds_config.config
        if self.zero3_init_flag and self.zero_stage != 3:
            self.zero3_init_flag = False  # Accelerate's rule: only meaningful with ZeRO-3
        self._selected = False
        self._run: BackendContext | None = None  # the run of the Accelerator using it (see attach)
        self.dschf: object = None
        """transformers' ``HfDeepSpeedConfig`` made by :meth:`set_deepspeed_weakref` (kept alive)."""

    # -- building the config ------------------------------------------------
    def _from_fields(self) -> DeepSpeedConfig:
        self.zero_stage = 2 if self.zero_stage is None else _stage(self.zero_stage)
        optimizer_device = _device("offload_optimizer_device", self.offload_optimizer_device)
        param_device = _device("offload_param_device", self.offload_param_device)
        check_combination(self.zero_stage, optimizer_device, param_device)
        _warn_ignored_param_offload(self.zero_stage, param_device)
        self.offload_optimizer_device, self.offload_param_device = optimizer_device, param_device
        zero: DeepSpeedConfig = {"stage": self.zero_stage}
        for kind, device, path in (
            ("optimizer", optimizer_device, self.offload_optimizer_nvme_path),
            ("param", param_device, self.offload_param_nvme_path),
        ):
            if device == "none":
                continue
            if device == "nvme" and not path:
                raise ConfigError(
                    f"offload_{kind}_device=nvme needs offload_{kind}_nvme_path (a directory on the NVMe drive)"
                )
            zero[f"offload_{kind}"] = {"device": device, **({"nvme_path": path} if path else {})}
        if self.zero_stage == 3:
            zero["stage3_gather_16bit_weights_on_model_save"] = self.zero3_save_16bit_model
        return {
            "train_batch_size": "auto",
            "train_micro_batch_size_per_gpu": "auto",
            "gradient_accumulation_steps": self.gradient_accumulation_steps or "auto",
            "gradient_clipping": "auto"
            if self.gradient_clipping is None
            else self.gradient_clipping,
            "zero_optimization": zero,
            "steps_per_print": 2**31 - 1,
            "zero_allow_untested_optimizer": True,  # any torch optimizer, as in Accelerate
        }

    def _from_file(self) -> None:
        """Complete the given config in place with the plugin's fields (no copy: see ``__post_init__``)."""
        config = self._hf.config
        zero = config.setdefault("zero_optimization", {})
        zero.setdefault("stage", 0)
        _merge(config, "zero_optimization.stage", self.zero_stage, _stage)
        _merge(config, "gradient_accumulation_steps", self.gradient_accumulation_steps, None)
        _merge(config, "gradient_clipping", self.gradient_clipping, float)
        for kind in ("optimizer", "param"):
            device = getattr(self, f"offload_{kind}_device")
            if device is not None:
                _merge(
                    config,
                    f"zero_optimization.offload_{kind}.device",
                    _device(f"offload_{kind}_device", device),
                    None,
                )
        if self.config_sources.get("zero3_save_16bit_model") is not None:
            _merge(
                config,
                "zero_optimization.stage3_gather_16bit_weights_on_model_save",
                self.zero3_save_16bit_model,
                None,
            )
        stage = config["zero_optimization"]["stage"]
        if stage != "auto":
            stage = _stage(stage)
            config["zero_optimization"]["stage"] = stage
        self.zero_stage = stage
        optimizer_device = _device(
            "zero_optimization.offload_optimizer.device",
            (zero.get("offload_optimizer") or {}).get("device", "none"),
        )
        param_device = _device(
            "zero_optimization.offload_param.device",
            (zero.get("offload_param") or {}).get("device", "none"),
        )
        if stage != "auto":
            check_combination(stage, optimizer_device, param_device)
        _warn_ignored_param_offload(stage, param_device)
        self.offload_optimizer_device, self.offload_param_device = optimizer_device, param_device
        gather = zero.get("stage3_gather_16bit_weights_on_model_save")
        if gather is not None and gather != "auto":
            self.zero3_save_16bit_model = parse_bool(
                "stage3_gather_16bit_weights_on_model_save", gather
            )
        config.setdefault("steps_per_print", 2**31 - 1)
        config.setdefault("zero_allow_untested_optimizer", True)

    # -- queries ----------------------------------------------------------------
    @property
    def _hf(self) -> HfDeepSpeedConfig:
        """:attr:`hf_ds_config`, which ``__post_init__`` made an :class:`HfDeepSpeedConfig`."""
        return cast("HfDeepSpeedConfig", self.hf_ds_config)

    def get_value(self, ds_key_long: str, default: JSONValue = None) -> JSONValue:
        """The value at a dotted key of the DeepSpeed config (``zero_optimization.stage``)."""
        return self._hf.get_value(ds_key_long, default)

    def is_auto(self, ds_key_long: str) -> bool:
        """Whether the dotted key is ``"auto"``."""
        return self.get_value(ds_key_long) == "auto"

    def fill_match(
        self,
        ds_key_long: str,
        mismatches: list[str] | None = None,
        must_match: bool = True,
        **kwargs: JSONValue,
    ) -> None:
        """Fill ``ds_key_long`` when it is ``"auto"`` from ``kwargs[ds_key_long]`` (Accelerate's API).

        An ``"auto"`` with no value in ``kwargs`` is a :class:`ConfigError`. With
        ``must_match``, a set value that differs from ``kwargs`` is appended to ``mismatches``.
        """
        mismatches = [] if mismatches is None else mismatches
        node, key = self._hf.find_config_node(ds_key_long)
        if node is None:
            return
        if node.get(key) == "auto":
            if ds_key_long not in kwargs:
                raise ConfigError(
                    f"{ds_key_long} is auto in the DeepSpeed config and nothing gives its value: "
                    "write a value for it in the DeepSpeed config"
                )
            node[key] = kwargs[ds_key_long]
            return
        if must_match and node.get(key) is not None and ds_key_long in kwargs:
            if node[key] != kwargs[ds_key_long]:
                mismatches.append(
                    f"- ds {ds_key_long}={node[key]} vs arg {ds_key_long}={kwargs[ds_key_long]}"
                )

    def deepspeed_config_process(
        self,
        prefix: str = "",
        mismatches: list[str] | None = None,
        config: DeepSpeedConfig | None = None,
        must_match: bool = True,
        **kwargs: JSONValue,
    ) -> None:
        """:meth:`fill_match` every key of the config with ``kwargs`` (dotted keys); mismatches raise."""
        mismatches = [] if mismatches is None else mismatches
        config = self.deepspeed_config if config is None else config
        for key, value in list(config.items()):
            if isinstance(value, dict):
                self.deepspeed_config_process(
                    prefix=f"{prefix}{key}.",
                    mismatches=mismatches,
                    config=value,
                    must_match=must_match,
                    **kwargs,
                )
            else:
                self.fill_match(f"{prefix}{key}", mismatches, must_match=must_match, **kwargs)
        if mismatches and prefix == "":
            raise ConfigError(
                "these DeepSpeed config values differ from the ones given:\n"
                + "\n".join(mismatches)
                + "\nset them to auto in the DeepSpeed config to take the given ones"
            )

    def set_mixed_precision(self, mixed_precision: Precision | str) -> None:
        """Make the config's ``fp16`` / ``bf16`` sections say ``mixed_precision`` (a name or a
        :class:`~accel.precision.Precision`), by :func:`half_precision_sections`.

        An absent section is added (enabled for the chosen precision, else disabled); an
        ``"auto"`` is filled; a section enabled for the other 16-bit type is an error.
        """
        name = _precision_name(mixed_precision)
        config = self.deepspeed_config
        wanted = half_precision_sections(mixed_precision)
        mine = next((section for section, on in wanted.items() if on), None)
        if mine is not None:
            other = "bf16" if mine == "fp16" else "fp16"
            if str((config.get(other) or {}).get("enabled", False)).lower() == "true":
                raise ConfigError(
                    f"mixed_precision={name} but the DeepSpeed config enables {other}: set "
                    f"{other}.enabled to false or auto, or use mixed_precision {other}"
                )
        if mine == "fp16" and "fp16" not in config:
            config["fp16"] = {"enabled": True, "auto_cast": True}
        elif mine == "bf16" and "bf16" not in config:
            config["bf16"] = {"enabled": True}
        for section in ("fp16", "bf16"):
            config.setdefault(section, {"enabled": False})
        self.fill_match("fp16.enabled", must_match=False, **{"fp16.enabled": wanted["fp16"]})
        self.fill_match("bf16.enabled", must_match=False, **{"bf16.enabled": wanted["bf16"]})

    def set_deepspeed_weakref(self) -> None:
        """Point transformers' ``is_deepspeed_zero3_enabled()`` / ``deepspeed_config()`` at this config.

        Makes a transformers ``HfDeepSpeedConfig`` from a copy of the config (``auto``
        batch values replaced by 1, as Accelerate does) and keeps it in :attr:`dschf`.
        Needs transformers.
        """
        try:
            from transformers.integrations import HfDeepSpeedConfig as TransformersConfig
            from transformers.integrations import unset_hf_deepspeed_config
        except ImportError:
            raise ImportError(
                "DeepSpeedPlugin.set_deepspeed_weakref tells transformers about the DeepSpeed "
                "config: pip install transformers"
            ) from None
        config = copy.deepcopy(self.deepspeed_config)
        for key in ("gradient_accumulation_steps", "train_micro_batch_size_per_gpu"):
            if config.get(key, "auto") == "auto":
                config[key] = 1
        if config.get("train_batch_size") == "auto":
            del config["train_batch_size"]
        unset_hf_deepspeed_config()
        self.dschf = TransformersConfig(config)

    def is_zero3_init_enabled(self) -> bool:
        """Whether models are built partitioned (``deepspeed.zero.Init``, ZeRO-3 only)."""
        return bool(self.zero3_init_flag)

    def select(self, _from_accelerator_state: bool = False) -> None:
        """Make this the active plugin (done by the Accelerator); tells transformers about its config.

        transformers is told (:meth:`set_deepspeed_weakref`) when it is already imported or
        ``zero3_init_flag`` is on, so that selecting never imports it for nothing.
        """
        if not _from_accelerator_state:
            raise ValueError(
                "a DeepSpeedPlugin is selected by the Accelerator it is given to, not by hand"
            )
        if "transformers" in sys.modules or self.zero3_init_flag:
            self.set_deepspeed_weakref()
        self._selected = True

    def attach(self, run: BackendContext) -> None:
        """Called by the DeepSpeed backend with its run context (a ``BackendContext``): what
        the plugin needs of the run (the mixed precision for ZeRO-3 init) is read there."""
        self._run = run

    def __getstate__(self) -> dict[str, object]:
        # A copy or a pickle (transformers saves TrainingArguments, which hold the plugin,
        # with every checkpoint) leaves the run behind: it holds the prepared engine.
        return {**self.__dict__, "_run": None}

    @property
    def selected(self) -> bool:
        """Whether this plugin is the active one (the one the Accelerator was given)."""
        return self._selected

    def set_moe_leaf_modules(self, model: torch.nn.Module) -> list[type]:
        """Mark the MoE layer classes of ``model`` as ZeRO-3 leaf modules; returns the classes found."""
        names = list(self.transformer_moe_cls_names or [])
        if not names:
            return []
        found = {type(m) for m in model.modules() if type(m).__name__ in names}
        missing = set(names) - {c.__name__ for c in found}
        if missing:
            raise ConfigError(
                f"transformer_moe_cls_names: no module of class {', '.join(sorted(missing))} in the model"
            )
        from deepspeed.utils import set_z3_leaf_modules

        set_z3_leaf_modules(model, list(found))
        return list(found)

    @contextlib.contextmanager
    def zero3_init_context_manager(self, enable: bool | None = None) -> Generator[None, None, None]:
        """Models built inside are created partitioned (``deepspeed.zero.Init``) when ZeRO-3 init is on.

        ``enable`` overrides :attr:`zero3_init_flag` for the block, as in Accelerate: with
        ``enable=False`` nothing is partitioned, and transformers' ``from_pretrained`` (which
        asks ``is_deepspeed_zero3_enabled()``) is told so too. Outside ZeRO-3 this does nothing.
        """
        old = self.zero3_init_flag
        enabled = old if enable is None else bool(enable)
        tell_transformers = enabled != old and self.dschf is not None
        if tell_transformers:
            self.zero3_init_flag = enabled
            self.set_deepspeed_weakref()
        try:
            if not enabled or self.zero_stage != 3:
                yield
            else:
                import deepspeed

                with deepspeed.zero.Init(config_dict_or_path=self._zero_init_config()):
                    yield
        finally:
            if tell_transformers:
                self.zero3_init_flag = old
                self.set_deepspeed_weakref()

    def _zero_init_config(self) -> DeepSpeedConfig:
        """What ``zero.Init`` needs: the parameter offload and dtype (fp16/bf16 from the config or
        else the mixed precision of the run it is attached to, otherwise fp32), without ``auto``
        values."""
        wanted = half_precision_sections(self._run.precision if self._run is not None else "no")
        zero: DeepSpeedConfig = {"stage": 3}
        config: DeepSpeedConfig = {
            "train_micro_batch_size_per_gpu": 1,
            "gradient_accumulation_steps": 1,
            "zero_optimization": zero,
        }
        for name in ("fp16", "bf16"):
            enabled = self.get_value(f"{name}.enabled")
            config[name] = {"enabled": enabled if isinstance(enabled, bool) else wanted[name]}
        offload = self.get_value("zero_optimization.offload_param")
        if isinstance(offload, dict) and "auto" not in offload.values():
            zero["offload_param"] = dict(offload)
        return config


def half_precision_sections(precision: Precision | str) -> dict[str, bool]:
    """Which of the DeepSpeed config's ``fp16`` / ``bf16`` sections a precision enables: the one rule.

    ``precision`` is a :class:`~accel.precision.Precision` or a ``mixed_precision`` name; its
    ``dtype`` decides (:func:`accel.precision.dtype_of` for a name). fp16 enables ``fp16``, bf16
    enables ``bf16``, and fp8 enables ``bf16`` too: the layers that are not FP8 compute in bf16
    (the fp8 precision's ``dtype``), as Accelerate does with TransformerEngine. Full precision
    enables neither.
    """
    import torch
    from accel.precision import dtype_of

    dtype = dtype_of(precision)
    return {"fp16": dtype == torch.float16, "bf16": dtype == torch.bfloat16}


def _precision_name(precision: Precision | str) -> str:
    """The ``mixed_precision`` name of a precision or a name, for messages."""
    return str(getattr(precision, "name", precision))


def _merge(
    config: DeepSpeedConfig,
    dotted: str,
    value: JSONValue,
    cast: Callable[[JSONValue], JSONValue] | None,
) -> None:
    """Put a plugin field into the config: fills ``auto`` or a missing key; a different value is an error."""
    if value is None:
        return
    *parents, last = dotted.split(".")
    node = config
    for part in parents:
        node = node.setdefault(part, {})
    current = node.get(last)
    if current is None or current == "auto":
        node[last] = value
        return
    same = (cast(current) == cast(value)) if cast else (current == value)
    if not same:
        raise ConfigError(
            f"the DeepSpeed config file sets {dotted}={current!r} but the plugin (or the "
            f"deepspeed_config section / flag) sets {value!r}: keep only one of them"
        )
