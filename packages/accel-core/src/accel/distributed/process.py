"""Process-group set-up and plugin-object lookup shared by backends.

Backends such as FSDP, DeepSpeed and Megatron-LM need a ``torch.distributed`` process
group even in a single process, and each reads (or builds) its plugin object of the
:class:`~accel.state.AcceleratorState`. Both live here so a backend written by a third
party does it the same way as the first-party ones.
"""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import Protocol, TypeVar, cast

P = TypeVar("P")


class HasPlugins(Protocol):
    """What holds the plugin objects by key: a backend context or the Accelerator's state."""

    @property
    def plugins(self) -> MutableMapping[str, object]: ...


class HasState(Protocol):
    """What holds a state with plugin objects: an Accelerator."""

    @property
    def state(self) -> HasPlugins: ...


def ensure_process_group(backend: str = "gloo") -> bool:
    """Make sure ``torch.distributed`` has a default process group.

    A process started by ``accel launch`` (or torchrun) already has one once the state is
    set up. A lone process without one gets a one-process group (rank 0, world size 1)
    over an in-memory store with ``backend`` (``gloo`` by default, which runs on the CPU):
    no address, port or environment variable is needed. Returns True when this call
    created the group, False when one existed.
    """
    import torch.distributed as dist

    if dist.is_initialized():
        return False
    dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)
    return True


def plugin_object(owner: HasPlugins | HasState, key: str, factory: Callable[[], P]) -> P:
    """The plugin object ``key`` (``"fsdp_plugin"``) of the Accelerator's state, made if absent.

    ``owner`` is a :class:`~accel.backends.BackendContext` or an
    :class:`~accel.state.AcceleratorState` (their ``plugins``), or an :class:`~accel.Accelerator`
    (its ``state``'s). When no object was passed in code
    (``Accelerator(fsdp_plugin=...)``), ``factory()`` builds one (a plugin class reads the
    launched config section itself) and it is recorded in the state, so ``state.<key>``
    returns the object the backend uses from then on.
    """
    holder = cast(HasPlugins, owner) if hasattr(owner, "plugins") else cast(HasState, owner).state
    plugins = holder.plugins
    plugin = plugins.get(key)
    if plugin is None:
        made = factory()
        plugins[key] = made
        return made
    return cast(P, plugin)


__all__ = ["ensure_process_group", "plugin_object"]


def wait_for_everyone() -> None:
    """Barrier: every process waits here until all of them reach it (no-op on one process)."""
    from accel.state import PartialState

    PartialState().wait_for_everyone()


def is_initialized() -> bool:
    """Whether the process state (:class:`~accel.state.PartialState`) has been set up."""
    from accel.state import PartialState

    return bool(PartialState._shared_state)
