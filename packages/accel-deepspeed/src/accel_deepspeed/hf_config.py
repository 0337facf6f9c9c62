"""``HfDeepSpeedConfig``: a DeepSpeed config (dict, JSON file or JSON text) with dotted-key queries. Torch-free.

transformers' ``HfDeepSpeedConfig`` / ``HfTrainerDeepSpeedConfig`` subclass this class
(through ``accelerate.utils.deepspeed``): they fill the config's ``"auto"`` values in
place, through :meth:`HfDeepSpeedConfig.find_config_node` and :attr:`HfDeepSpeedConfig.config`.
"""

from __future__ import annotations

import base64
import binascii
import copy
import json
import os
from pathlib import Path
from typing import Any, TypeAlias

from accel.errors import ConfigError

JSONValue: TypeAlias = Any
"""A value parsed from JSON (str, int, float, bool, None, a list or a dict of them). A DeepSpeed
config is a user's JSON document, whose values are checked where they are read (``isinstance``,
the section's declarations), so readers index into it freely."""

DeepSpeedConfig: TypeAlias = dict[str, JSONValue]
"""A DeepSpeed JSON config (the object ``deepspeed.initialize(config=...)`` takes)."""

OFFLOAD_TARGETS = ("cpu", "nvme")
"""Offload devices that count as offloading (``none`` does not)."""


def _read_config(source: object) -> JSONValue:
    """The config held by ``source``: a dict (copied), a JSON file path, JSON text or base64 JSON."""
    if isinstance(source, HfDeepSpeedConfig):
        return copy.deepcopy(source.config)
    if isinstance(source, dict):
        # the caller's dict is never changed: filling "auto" would make it unusable a second time
        return copy.deepcopy(source)
    if not isinstance(source, (str, os.PathLike)):
        raise ConfigError(
            "a DeepSpeed config must be a dict, the path of a JSON file, JSON text or an "
            f"HfDeepSpeedConfig, not {type(source).__name__}"
        )
    path = Path(source).expanduser()
    try:
        is_file = path.is_file()
    except OSError:  # a long JSON / base64 string is not a usable path
        is_file = False
    if is_file:
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ConfigError(f"deepspeed_config_file {path} is not valid JSON: {exc}") from None
    text = os.fspath(source)
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    try:
        return json.loads(base64.urlsafe_b64decode(text).decode("utf-8"))
    except (binascii.Error, UnicodeDecodeError, ValueError):
        pass
    raise ConfigError(
        f"deepspeed_config_file {text!r} does not exist and is not JSON (nor base64-encoded JSON): "
        "give the path of a DeepSpeed JSON config, a dict, or its JSON text"
    )


class HfDeepSpeedConfig:
    """Holds a DeepSpeed config and answers questions about it (``is_zero3()``, ``get_value(...)``).

    ``config_file_or_dict`` is a dict, the path of a JSON file, JSON text (optionally
    base64-encoded) or another :class:`HfDeepSpeedConfig`. A dict is copied: the
    caller's is never changed. :attr:`config` is the one dict every query reads, and
    what subclasses (transformers' ``HfTrainerDeepSpeedConfig``) fill in place; the
    ZeRO stage and offload answers follow it as it changes.
    """

    def __init__(self, config_file_or_dict: object):
        config = _read_config(config_file_or_dict)
        if not isinstance(config, dict):
            raise ConfigError("a DeepSpeed config must be a JSON object (a mapping of keys)")
        self.config: DeepSpeedConfig = config
        self.set_stage_and_offload()

    def set_stage_and_offload(self) -> None:
        """Kept for Accelerate's API: :attr:`_stage` and :attr:`_offload` are read from the config live."""

    @property
    def _stage(self) -> JSONValue:
        """The ZeRO stage (``zero_optimization.stage``; -1 when not set), as Accelerate's attribute."""
        return self.get_value("zero_optimization.stage", -1)

    @property
    def _offload(self) -> bool:
        """Whether ZeRO-2/3 offloads optimizer states or parameters (to cpu or nvme)."""
        if not (self.is_zero2() or self.is_zero3()):
            return False
        return any(
            self.get_value(f"zero_optimization.offload_{kind}.device") in OFFLOAD_TARGETS
            for kind in ("optimizer", "param")
        )

    def find_config_node(self, ds_key_long: str) -> tuple[DeepSpeedConfig | None, str]:
        """The dict holding the last part of a dotted key, and that part (None if a parent is missing)."""
        *parents, last = ds_key_long.split(".")
        node: JSONValue = self.config
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
            if node is None:
                return None, last
        return (node if isinstance(node, dict) else None), last

    def get_value(self, ds_key_long: str, default: JSONValue = None) -> JSONValue:
        """The value at a dotted key, or ``default``."""
        node, last = self.find_config_node(ds_key_long)
        return default if node is None else node.get(last, default)

    def del_config_sub_tree(self, ds_key_long: str, must_exist: bool = False) -> None:
        """Remove a dotted key (and what is under it); with ``must_exist`` a missing key is an error."""
        node, last = self.find_config_node(ds_key_long)
        if node is None or last not in node:
            if must_exist:
                raise ConfigError(f"{ds_key_long} is not in the DeepSpeed config")
            return
        del node[last]

    def is_true(self, ds_key_long: str) -> bool:
        """Whether the value is set and true (False when missing), as Accelerate answers it."""
        value = self.get_value(ds_key_long)
        return False if value is None else bool(value)

    def is_false(self, ds_key_long: str) -> bool:
        """Whether the value is set and false (False when missing), as Accelerate answers it."""
        value = self.get_value(ds_key_long)
        return False if value is None else not bool(value)

    def is_auto(self, ds_key_long: str) -> bool:
        """Whether the value is ``"auto"``."""
        return self.get_value(ds_key_long) == "auto"

    def is_zero2(self) -> bool:
        """ZeRO stage 2."""
        return self._stage == 2

    def is_zero3(self) -> bool:
        """ZeRO stage 3."""
        return self._stage == 3

    def is_offload(self) -> bool:
        """Whether ZeRO-2/3 offloads optimizer states or parameters (to cpu or nvme)."""
        return self._offload

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.config!r})"
