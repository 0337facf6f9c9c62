"""The settings ``accel launch`` resolved, as a worker process reads them (``ACCEL_LAUNCH_CONFIG``)."""

from __future__ import annotations

import json
from typing import Any

from accel import environment
from accel.errors import ConfigError


def launched_config() -> dict[str, Any]:
    """In a process started by ``accel launch``: the resolved settings (``ACCEL_LAUNCH_CONFIG``).

    Plugins read their section here (``launched_config().get("fsdp_config", {})``).
    Empty outside ``accel launch``.
    """
    raw = environment.get_str(environment.LAUNCH_CONFIG)
    if not raw:
        return {}
    try:
        data = json.loads(raw)
    except json.JSONDecodeError:
        raise ConfigError(
            f"environment variable {environment.LAUNCH_CONFIG} is not valid JSON; "
            "it is set by accel launch, unset it"
        ) from None
    return data if isinstance(data, dict) else {}
