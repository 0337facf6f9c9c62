"""What every prepared loader shares with Accelerate's: its place in the gradient state.

:class:`DataLoaderStateMixin` is the loader side of :class:`~accel.state.GradientState`:
while a loader iterates it is the active one, and what it says of its epoch
(``end_of_dataloader``, ``remainder``) is what gradient accumulation and
:meth:`~accel.Accelerator.gather_for_metrics` read. ``base_dataloader`` is the
``DataLoader`` a loader iterates: accel's loaders are ``DataLoader`` subclasses and wrap
nothing, so it is the loader itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from accel.state import GradientState

_L = TypeVar("_L")


class DataLoaderStateMixin:
    """A loader the gradient state follows: Accelerate's class of the same name.

    ``end_of_dataloader`` turns true while the loader hands out the last batch of its
    epoch; ``remainder`` is then the number of real samples in the last global batch when
    that batch was completed with duplicates (``even_batches``), else -1. :meth:`begin`
    makes the loader the gradient state's active one for an iteration and :meth:`end`
    gives the place back. :class:`~accel.data_loader.DataLoaderShard`,
    :class:`~accel.data_loader.DataLoaderDispatcher` and
    :class:`~accel.data_loader.SkipDataLoader` are such loaders; a custom loader that
    subclasses it, sets ``self.gradient_state = GradientState()`` and calls
    :meth:`begin` / :meth:`end` around its iteration is synchronised on like them.
    """

    end_of_dataloader: bool = False
    remainder: int = -1
    gradient_state: GradientState

    def reset(self) -> None:
        """Forget the previous iteration's end: not at the end, remainder unknown."""
        self.end_of_dataloader = False
        self.remainder = -1

    def begin(self) -> None:
        """Start an iteration: reset, and become the gradient state's active loader."""
        self.reset()
        self.gradient_state._add_dataloader(self)

    def end(self) -> None:
        """End an iteration: the loader that was active before this one is active again."""
        self.gradient_state._remove_dataloader(self)


class BaseDataLoader:
    """``loader.base_dataloader``: the ``DataLoader`` a loader iterates, here the loader itself.

    Accelerate's loaders wrap a ``DataLoader`` (or torchdata's ``StatefulDataLoader``) and
    name it so; accel's are one, so code reading the attribute gets the loader. As in
    Accelerate it is an attribute of instances: read on the class it raises
    ``AttributeError``.
    """

    def __get__(self, loader: _L | None, owner: type) -> _L:
        if loader is None:
            raise AttributeError(f"base_dataloader is an attribute of a {owner.__name__} instance")
        return loader


__all__ = ["BaseDataLoader", "DataLoaderStateMixin"]
