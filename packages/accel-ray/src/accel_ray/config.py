"""The ``ray_config`` section, declared once: validation, the ``--ray*`` flags and their reader.

Torch-free and Ray-free: ``accel launch --help`` and a bad value never import Ray.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import TypedDict

from accel.config.options import Option, Section
from accel.errors import ConfigError


def read_resources(value: object, label: str) -> dict[str, float]:
    """Resources of one Ray worker from a mapping, JSON or ``CPU=1,GPU=1`` text."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("{"):
            try:
                value = json.loads(text)
            except ValueError as exc:
                raise ConfigError(f"{label}={value!r} is not valid JSON: {exc}") from None
        else:
            pairs = [part.partition("=") for part in text.split(",") if part.strip()]
            if not pairs or any(not sep for _, sep, _ in pairs):
                raise ConfigError(
                    f"{label}={value!r}: write NAME=AMOUNT pairs such as CPU=1,GPU=1 (or JSON)"
                )
            value = {name.strip(): amount.strip() for name, _, amount in pairs}
    if not isinstance(value, Mapping) or not value:
        raise ConfigError(f"{label}={value!r}: give resources such as CPU=1,GPU=1")
    resources: dict[str, float] = {}
    for name, amount in value.items():
        try:
            number = float(amount)
        except (TypeError, ValueError):
            raise ConfigError(f"{label}: {name}={amount!r} is not a number") from None
        if number < 0:
            raise ConfigError(f"{label}: {name}={amount!r} is negative")
        resources[str(name)] = number
    return resources


def read_num_workers(value: object, label: str) -> int | tuple[int, int]:
    """Ray Train workers: ``N``, or an elastic range ``MIN:MAX`` (also ``[MIN, MAX]``).

    A range whose ends are equal is that fixed number.
    """
    text = str(value).strip()
    if isinstance(value, (list, tuple)):
        parts = [str(part).strip() for part in value]
    elif isinstance(value, int) and not isinstance(value, bool):
        parts = [text]
    elif isinstance(value, str):
        parts = [part.strip() for part in text.split(":")]
    else:
        parts = []
    if not 1 <= len(parts) <= 2 or not all(part.isdigit() for part in parts):
        raise ConfigError(
            f"{label}={value!r}: give a number of workers N or an elastic range MIN:MAX (e.g. 1:4)"
        )
    numbers = [int(part) for part in parts]
    if numbers[0] < 1:
        raise ConfigError(f"{label}={value!r}: at least 1 worker")
    if len(numbers) == 1:
        return numbers[0]
    low, high = numbers
    if low > high:
        raise ConfigError(f"{label}={value!r}: MIN {low} is larger than MAX {high}")
    return low if low == high else (low, high)


def read_runtime_env(value: object, label: str) -> dict[str, object]:
    """A Ray runtime environment from a mapping, JSON text or a ``.json``/``.yaml`` file."""
    if isinstance(value, str):
        text = value.strip()
        if not text.startswith("{"):
            if not os.path.isfile(text):
                raise ConfigError(
                    f"{label}={value!r} is neither JSON nor an existing .json/.yaml file"
                )
            with open(text, encoding="utf-8") as handle:
                text = handle.read()
            if not value.strip().endswith(".json"):
                import yaml  # a Ray dependency

                try:
                    value = yaml.safe_load(text)
                except yaml.YAMLError as exc:
                    raise ConfigError(f"{label}: cannot read {value!r}: {exc}") from None
                text = None
        if text is not None:
            try:
                value = json.loads(text)
            except ValueError as exc:
                raise ConfigError(f"{label}={value!r} is not valid JSON: {exc}") from None
    if not isinstance(value, Mapping):
        raise ConfigError(f'{label} must be a mapping such as {{"pip": [...], "env_vars": {{}}}}')
    return dict(value)


RAY_SECTION = Section(
    "ray_config",
    [
        Option(
            "use_ray",
            bool,
            default=False,
            flag="ray",
            store_true=True,
            help="run the script on a Ray cluster, one Ray Train worker per process",
        ),
        Option(
            "ray_address",
            help="address of the Ray cluster (host:port or ray://host:10001); default: "
            "$RAY_ADDRESS, else a new local Ray instance",
            metavar="ADDRESS",
        ),
        Option(
            "ray_num_workers",
            "any",
            reader=read_num_workers,
            help="Ray Train workers (processes), or MIN:MAX for elastic training (Ray restarts "
            "the group at any size in the range after a loss, or grows it when nodes join); "
            "default: num_processes",
            allowed="a number N >= 1 or a range MIN:MAX",
            metavar="N|MIN:MAX",
        ),
        Option(
            "ray_resources_per_worker",
            "any",
            reader=read_resources,
            help="resources of each worker, e.g. CPU=2,GPU=1 (GPU > 0 trains on GPUs)",
            allowed="NAME=AMOUNT pairs or a JSON mapping",
            metavar="CPU=N,GPU=N",
        ),
        Option(
            "ray_max_failures",
            int,
            default=0,
            minimum=-1,
            help="how many times Ray restarts the worker group after a failure (-1: always)",
            metavar="N",
        ),
        Option(
            "ray_resize_interval",
            float,
            minimum=0,
            help="with a MIN:MAX range: how often (seconds) Ray checks whether a running "
            "group can grow (ScalingConfig.elastic_resize_monitor_interval_s; default: Ray's, 60)",
            metavar="SECONDS",
        ),
        Option(
            "ray_num_to_keep",
            int,
            minimum=1,
            help="how many of the newest reported checkpoints Ray keeps under the storage path "
            "(default: all)",
            metavar="N",
        ),
        Option(
            "ray_runtime_env",
            "any",
            reader=read_runtime_env,
            help="Ray runtime environment: JSON, or a .json/.yaml file (working_dir, pip, "
            "env_vars, ...)",
            allowed="a JSON mapping or the path of a .json/.yaml file",
            metavar="JSON|FILE",
        ),
        Option(
            "ray_storage_path",
            help="where Ray keeps the run and its reported checkpoints (shared by every node: "
            "NFS path or s3://...); default: Ray's (~/ray_results)",
            metavar="PATH",
        ),
        Option(
            "ray_name",
            help="name of the Ray Train run (its folder under the storage path); reusing it "
            "resumes from its last reported checkpoint",
            metavar="NAME",
        ),
        Option(
            "ray_report_checkpoints",
            bool,
            default=True,
            help="report every accelerator.save_state() checkpoint to Ray Train",
            metavar="{true,false}",
        ),
    ],
    title="Ray",
)
"""The ``ray_config`` section: ``--ray`` and the ``--ray_*`` flags of ``accel launch``."""


class RaySettings(TypedDict):
    """The typed values of a ``ray_config`` section (what :data:`RAY_SECTION` reads)."""

    use_ray: bool
    ray_address: str | None
    ray_num_workers: int | tuple[int, int] | None
    ray_resources_per_worker: dict[str, float] | None
    ray_max_failures: int
    ray_resize_interval: float | None
    ray_num_to_keep: int | None
    ray_runtime_env: dict[str, object] | None
    ray_storage_path: str | None
    ray_name: str | None
    ray_report_checkpoints: bool


validate_section = RAY_SECTION.validate
"""Problems of a ``ray_config`` mapping (empty when it is valid)."""

__all__ = [
    "RAY_SECTION",
    "read_num_workers",
    "read_resources",
    "read_runtime_env",
    "validate_section",
]
