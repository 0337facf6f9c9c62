"""Cheap context managers of the training step: a shared no-op, and several entered as one."""

from __future__ import annotations

import contextlib
from typing import Any


class NoContext:
    """A reusable context manager that does nothing (cheaper than ``contextlib.nullcontext()``)."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc_info: Any) -> None:
        return None


NO_CONTEXT = NoContext()
"""The shared do-nothing context."""


class Contexts:
    """Several context managers entered in order and exited in reverse (an ``ExitStack``)."""

    __slots__ = ("contexts", "stack")

    def __init__(self, contexts: list[contextlib.AbstractContextManager]):
        self.contexts = contexts
        self.stack = contextlib.ExitStack()

    def __enter__(self) -> None:
        with contextlib.ExitStack() as stack:
            for context in self.contexts:
                stack.enter_context(context)
            self.stack = stack.pop_all()

    def __exit__(self, *exc_info: Any) -> bool | None:
        return self.stack.__exit__(*exc_info)


def has_no_sync(model: Any) -> bool:
    """Whether ``model`` has a ``no_sync`` (DDP, FSDP1), looked up without ``Module.__getattr__``."""
    return callable(getattr(type(model), "no_sync", None)) or "no_sync" in vars(model)
