"""``HfDeepSpeedConfig``: a DeepSpeed config (dict or JSON file) with dotted-key queries. Torch-free."""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

from accel.errors import ConfigError


class HfDeepSpeedConfig:
    """Holds a DeepSpeed config and answers questions about it (``is_zero3()``, ``get_value(...)``).

    ``config_file_or_dict`` is a dict, a path to a JSON file, or another
    :class:`HfDeepSpeedConfig`. The dict is copied: the caller's is never changed.
    """

    def __init__(self, config_file_or_dict: Any):
        if isinstance(config_file_or_dict, HfDeepSpeedConfig):
            config = copy.deepcopy(config_file_or_dict.config)
        elif isinstance(config_file_or_dict, dict):
            config = copy.deepcopy(config_file_or_dict)
        elif isinstance(config_file_or_dict, (str, os.PathLike)):
            path = Path(config_file_or_dict).expanduser()
            if not path.is_file():
                raise ConfigError(
                    f"deepspeed_config_file {path} does not exist: give the path of a DeepSpeed JSON config"
                )
            try:
                config = json.loads(path.read_text(encoding="utf-8"))
            except json.JSONDecodeError as exc:
                raise ConfigError(
                    f"deepspeed_config_file {path} is not valid JSON: {exc}"
                ) from None
        else:
            raise ConfigError(
                f"hf_ds_config must be a dict, a JSON file path or an HfDeepSpeedConfig, not {type(config_file_or_dict).__name__}"
            )
        if not isinstance(config, dict):
            raise ConfigError("a DeepSpeed config must be a JSON object (a mapping of keys)")
        self.config: dict[str, Any] = config

    def find_config_node(self, ds_key_long: str) -> tuple[dict[str, Any] | None, str]:
        """The dict holding the last part of a dotted key, and that part (None if a parent is missing)."""
        *parents, last = ds_key_long.split(".")
        node: Any = self.config
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
            if node is None:
                return None, last
        return (node if isinstance(node, dict) else None), last

    def get_value(self, ds_key_long: str, default: Any = None) -> Any:
        """The value at a dotted key, or ``default``."""
        node, last = self.find_config_node(ds_key_long)
        return default if node is None else node.get(last, default)

    def del_config_sub_tree(self, ds_key_long: str, must_exist: bool = False) -> None:
        """Remove a dotted key (and what is under it)."""
        node, last = self.find_config_node(ds_key_long)
        if node is None or last not in node:
            if must_exist:
                raise ConfigError(f"{ds_key_long} is not in the DeepSpeed config")
            return
        del node[last]

    def is_true(self, ds_key_long: str) -> bool:
        """Whether the value is True (False when missing)."""
        return self.get_value(ds_key_long) is True

    def is_false(self, ds_key_long: str) -> bool:
        """Whether the value is False (False when missing)."""
        return self.get_value(ds_key_long) is False

    def is_auto(self, ds_key_long: str) -> bool:
        """Whether the value is ``"auto"``."""
        return self.get_value(ds_key_long) == "auto"

    def _stage(self) -> Any:
        return self.get_value("zero_optimization.stage", 0)

    def is_zero2(self) -> bool:
        """ZeRO stage 2."""
        return self._stage() == 2

    def is_zero3(self) -> bool:
        """ZeRO stage 3."""
        return self._stage() == 3

    def is_offload(self) -> bool:
        """Whether optimizer states or parameters are offloaded (to cpu or nvme)."""
        return any(
            self.get_value(f"zero_optimization.offload_{kind}.device", "none") not in ("none", None)
            for kind in ("optimizer", "param")
        )

    def __repr__(self) -> str:
        return f"HfDeepSpeedConfig({self.config!r})"
