"""Cheap context managers of the training step: a shared no-op, and several entered as one."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from types import TracebackType

    import torch


class NoContext:
    """A reusable context manager that does nothing, entered and left without a Python frame.

    ``with accelerator.accumulate(model):`` enters it on most micro-batches, so its two
    methods are C callables (about 60 ns less per ``with`` than Python ones, 40%):
    ``__enter__`` is ``NoneType`` (``NoneType()`` is None) and ``__exit__`` is ``"".format``,
    which ignores its three arguments and returns ``""``: false, so exceptions propagate.
    """

    __slots__ = ()
    if TYPE_CHECKING:  # what the C callables below are, for type checkers

        def __enter__(self) -> None: ...
        def __exit__(self, *exc_info: object) -> bool | None: ...

    else:
        __enter__ = staticmethod(type(None))
        __exit__ = "".format


NO_CONTEXT = NoContext()
"""The shared do-nothing context."""


class Contexts:
    """Several context managers entered in order and exited in reverse (an ``ExitStack``)."""

    __slots__ = ("contexts", "stack")

    def __init__(self, contexts: Sequence[contextlib.AbstractContextManager]):
        self.contexts = contexts
        self.stack = contextlib.ExitStack()

    def __enter__(self) -> None:
        with contextlib.ExitStack() as stack:
            for context in self.contexts:
                stack.enter_context(context)
            self.stack = stack.pop_all()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> bool | None:
        return self.stack.__exit__(exc_type, exc, traceback)


class _NoSyncBackend(Protocol):
    """What :func:`no_sync_all` uses of a backend (:meth:`accel.backends.Backend.no_sync`)."""

    def no_sync(self, model: torch.nn.Module) -> contextlib.AbstractContextManager:
        """Context in which ``model``'s gradients are not synchronised."""
        ...


def has_no_sync(model: object) -> bool:
    """Whether ``model`` has a ``no_sync`` (DDP, FSDP1), looked up without ``Module.__getattr__``."""
    return callable(getattr(type(model), "no_sync", None)) or "no_sync" in vars(model)


def no_sync_all(
    backend: _NoSyncBackend, models: tuple[torch.nn.Module, ...], base_no_sync: bool
) -> contextlib.AbstractContextManager:
    """One context entering ``backend.no_sync`` of each model (``accumulate`` with several).

    ``base_no_sync``: the backend keeps the base ``no_sync``, which does nothing for a model
    without its own, so those models are left out.
    """
    contexts = [
        backend.no_sync(model) for model in models if not base_no_sync or has_no_sync(model)
    ]
    if not contexts:
        return NO_CONTEXT
    return contexts[0] if len(contexts) == 1 else Contexts(contexts)
