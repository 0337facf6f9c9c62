"""Accelerate's helpers over ``os.environ`` (``accelerate.utils.environment``): flags, clearing, restoring.

accel's own variables are ``ACCEL_*`` (their names: :mod:`accel.env_vars`);
:func:`purge_accelerate_environment` restores those and Accelerate's ``ACCELERATE_*`` after a test.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
from collections.abc import Callable, Generator, Mapping
from typing import Any, ParamSpec, TypeVar

from accel.config.core_options import ENVIRONMENT
from accel.config.options import Option, parse_bool
from accel.launchers.notebook import patch_environment
from accel.logging import get_logger

logger = get_logger(__name__)

_P = ParamSpec("_P")
_R = TypeVar("_R")

__all__ = [
    "clear_environment",
    "convert_dict_to_env_variables",
    "get_int_from_env",
    "parse_choice_from_env",
    "parse_flag_from_env",
    "patch_environment",
    "purge_accelerate_environment",
    "str_to_bool",
    "is_port_in_use",
    "check_os_kernel",
]


def str_to_bool(value: str, to_bool: bool = False) -> int | bool:
    """``"yes"/"true"/"1"/...`` -> 1, ``"no"/"false"/"0"/...`` -> 0 (bools with ``to_bool``).

    accel's one yes/no table (:func:`accel.config.options.parse_bool`); anything else raises
    :class:`~accel.errors.ConfigError`, a ``ValueError``.
    """
    result = parse_bool("value", value)
    return result if to_bool else int(result)


def get_int_from_env(env_keys: list[str], default: int) -> int:
    """The first of ``env_keys`` set to a non-negative integer, else ``default``."""
    for key in env_keys:
        value = _declared(key, int).from_env(default=-1)
        if value >= 0:
            return value
    return default


def parse_flag_from_env(key: str, default: bool = False) -> bool:
    """Whether the variable ``key`` is set to a true value (``default`` when unset)."""
    return bool(_declared(key, bool).from_env(default=default))


def parse_choice_from_env(key: str, default: str = "no") -> str:
    """The value of the variable ``key``, or ``default``."""
    return _declared(key, str).from_env(default=str(default))


def _declared(key: str, kind: type) -> Option:
    """accel's declaration of the variable ``key`` when it has one of this kind, else a
    declaration made for it: read, either way, by :meth:`Option.from_env`."""
    option = ENVIRONMENT.get(key)
    if option is not None and option.type == _KINDS[kind]:
        return option
    return Option(key, kind, None, env=key, flag=None, in_file=False)


_KINDS: dict[type, str] = {int: "int", bool: "bool", str: "str"}


_FORBIDDEN_ENV_CHARS = (";", "\n", "<", ">", " ")


def convert_dict_to_env_variables(current_env: Mapping[str, object]) -> list[str]:
    """``KEY=VALUE\\n`` lines for the valid entries of ``current_env``.

    As in Accelerate, an entry is dropped, with a warning, when its key or value is empty or
    either contains one of ``;``, a newline, ``<``, ``>`` or a space (or its key an ``=``).
    """
    lines = []
    for key, value in current_env.items():
        key, value = str(key), str(value)
        text = key + value
        if not key or not value or "=" in key or any(c in text for c in _FORBIDDEN_ENV_CHARS):
            logger.warning(
                f"Skipping {key}={value}: it contains forbidden characters or misses a value."
            )
            continue
        lines.append(f"{key}={value}\n")
    return lines


@contextlib.contextmanager
def clear_environment() -> Generator[None, None, None]:
    """Run the block with an empty ``os.environ``; the previous environment comes back afterwards."""
    saved = os.environ.copy()
    os.environ.clear()
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


PURGED_PREFIXES = ("ACCEL_", "ACCELERATE_")
"""Variables :func:`purge_accelerate_environment` restores: accel's and Accelerate's spelling."""

_PURGED_MARK = "_accel_purged_environment"


@contextlib.contextmanager
def _restored_accelerate_environment() -> Generator[None, None, None]:
    """Run the block, then put every ``ACCEL_*`` / ``ACCELERATE_*`` variable back as it was
    (values restored, new ones removed, removed ones set again)."""
    saved = {k: v for k, v in os.environ.items() if k.startswith(PURGED_PREFIXES)}
    try:
        yield
    finally:
        for key in [k for k in os.environ if k.startswith(PURGED_PREFIXES)]:
            if key not in saved:
                del os.environ[key]
        for key, value in saved.items():
            if os.environ.get(key) != value:
                os.environ[key] = value


def _purged(function: Callable[_P, _R]) -> Callable[_P, _R]:
    if getattr(function, _PURGED_MARK, False):
        return function

    @functools.wraps(function)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with _restored_accelerate_environment():
            return function(*args, **kwargs)

    setattr(wrapper, _PURGED_MARK, True)
    return wrapper


def _purge_test_methods(cls: type) -> None:
    """Wrap every ``test*`` method ``cls`` has, its own and inherited ones."""
    for name in dir(cls):
        if not name.startswith("test"):
            continue
        member = inspect.getattr_static(cls, name)
        if isinstance(member, (staticmethod, classmethod)) or not callable(member):
            continue
        setattr(cls, name, _purged(member))


def purge_accelerate_environment(func_or_cls: Callable | type) -> Callable | type:
    """Decorator: after the function, or each test method of the class, every ``ACCEL_*`` and
    ``ACCELERATE_*`` variable is as it was before (changed values restored, new ones removed).

    On a class (a ``unittest.TestCase`` or a plain pytest class) it wraps the ``test*``
    methods, inherited ones included, and those of every subclass defined later, as
    Accelerate's does.
    """
    if not inspect.isclass(func_or_cls):
        return _purged(func_or_cls)
    cls: type[Any] = func_or_cls
    _purge_test_methods(cls)
    previous = cls.__dict__.get("__init_subclass__")

    def __init_subclass__(subclass: type, **kwargs: object) -> None:
        if previous is not None:
            previous.__get__(None, subclass)(**kwargs)
        else:
            super(cls, subclass).__init_subclass__(**kwargs)
        _purge_test_methods(subclass)

    cls.__init_subclass__ = classmethod(__init_subclass__)  # type: ignore[assignment]
    return cls


def is_port_in_use(port: int | None = None) -> bool:
    """Whether something listens on ``localhost:port`` (default 29500, torch's rendezvous port)."""
    import socket

    port = port or 29500
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        return sock.connect_ex(("localhost", port)) == 0


def check_os_kernel() -> None:
    """Warn through the logger (main process only) when the Linux kernel is older than 5.5 (processes may hang there)."""
    import platform
    import re

    if platform.system() != "Linux":
        return
    match = re.match(r"(\d+)\.(\d+)", platform.release())
    if match and (int(match.group(1)), int(match.group(2))) < (5, 5):
        logger.warning(
            f"Detected kernel version {platform.release()}, which is below the recommended minimum of "
            "5.5.0; this can cause the process to hang. Upgrade the kernel to the minimum version or higher.",
            main_process_only=True,
        )
