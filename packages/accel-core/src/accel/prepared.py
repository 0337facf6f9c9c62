"""What an Accelerator has prepared: the one public view backends, precisions and checkpoints read.

``accelerator.prepared`` is a :class:`PreparedObjects`. Its lists are in preparation
order, which is also the order of the files in a ``save_state`` checkpoint (model ``i``,
optimizer ``i``, ...). The Accelerator appends to it in ``prepare``; a backend or
precision reads it (``accelerator.prepared.optimizers``) instead of private attributes.
Accelerate's private names (``accelerator._models``, ``_optimizers``, ``_schedulers``,
``_dataloaders``, ``_custom_objects``) stay as aliases of these lists for user code.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from accel.scheduler import AcceleratedScheduler


class PreparedObjects:
    """The models, optimizers, schedulers and data loaders an Accelerator prepared, plus the
    objects registered with ``register_for_checkpointing``.

    Each attribute is a plain list, in the order the objects were prepared (or registered).
    """

    def __init__(self) -> None:
        self.models: list[torch.nn.Module] = []
        """Prepared models (wrapped by the backend: DDP, FSDP, a DeepSpeed engine, ...)."""
        self.optimizers: list[torch.optim.Optimizer] = []
        """Prepared optimizers (:class:`~accel.optimizer.AcceleratedOptimizer` or a backend's own)."""
        self.schedulers: list[AcceleratedScheduler] = []
        """Prepared learning-rate schedulers (:class:`~accel.scheduler.AcceleratedScheduler`, ...)."""
        self.dataloaders: list[Any] = []
        """Prepared data loaders (sharded for this process)."""
        self.custom_objects: list[Any] = []
        """Objects with ``state_dict``/``load_state_dict`` that ``save_state`` also writes."""
        self._originals: list[
            tuple[object, object]
        ] = []  # (what the user passed, what prepare made)

    def lookup(self, obj: object) -> object:
        """What ``prepare(obj)`` returned before, or None when ``obj`` is new.

        ``obj`` may be a prepared object (of this Accelerator, or an optimizer, scheduler or
        data loader another one prepared: it is tracked here) or a model, optimizer or
        scheduler passed to ``prepare`` before, as Accelerate returns them unchanged.
        """
        for kind in (self.models, self.optimizers, self.schedulers, self.dataloaders):
            if any(o is obj for o in kind):
                return obj
        for original, prepared in self._originals:
            if original is obj:
                return prepared
        if not isinstance(obj, torch.nn.Module) and getattr(obj, "_is_accelerate_prepared", False):
            self.track(obj)
            return obj
        return None

    def track(self, obj: object, original: object = None) -> None:
        """Append ``obj`` to the list of its kind; an object of no known kind is ignored.

        ``original``, what ``prepare`` was given for ``obj``, is remembered for
        :meth:`lookup` (models, optimizers and schedulers: a raw DataLoader prepared again
        gives a new loader, as in Accelerate).
        """
        kind = self._kind(obj)
        if kind is None:
            return
        kind.append(obj)
        try:  # Accelerate's mark (another Accelerator returns such an optimizer, ... unchanged)
            setattr(obj, "_is_accelerate_prepared", True)  # noqa: B010 - on any object
        except AttributeError:
            pass
        if original is not None and original is not obj and kind is not self.dataloaders:
            self._originals.append((original, obj))

    def _kind(self, obj: object) -> list[Any] | None:
        """The list ``obj`` belongs in, or None."""
        from accel.data.loader import DataLoaderShard
        from accel.optimizer import AcceleratedOptimizer
        from accel.scheduler import AcceleratedScheduler

        if isinstance(obj, torch.nn.Module):
            return self.models
        if isinstance(obj, (AcceleratedOptimizer, torch.optim.Optimizer)):
            return self.optimizers
        if isinstance(obj, AcceleratedScheduler):
            return self.schedulers
        if isinstance(obj, (DataLoaderShard, torch.utils.data.DataLoader)):
            return self.dataloaders
        return None

    def register(self, *objects: object) -> None:
        """Add checkpointable objects to :attr:`custom_objects`.

        Raises ``ValueError`` (adding nothing) if one lacks ``state_dict`` or ``load_state_dict``.
        """
        bad = [
            i
            for i, o in enumerate(objects)
            if not (hasattr(o, "state_dict") and hasattr(o, "load_state_dict"))
        ]
        if bad:
            items = "".join(f"\n  - Item at index {i}, `{type(objects[i]).__name__}`" for i in bad)
            raise ValueError(
                "register_for_checkpointing: every object needs state_dict() and "
                f"load_state_dict() to be checkpointed; these lack them:{items}"
            )
        self.custom_objects.extend(objects)

    def optimizers_of(
        self, scheduler: object, also: Iterable[object] = ()
    ) -> list[torch.optim.Optimizer]:
        """The prepared optimizers wrapping ``scheduler.optimizer``.

        ``also`` holds optimizers prepared in the same ``prepare`` call and not tracked
        yet; they are searched first. When none wraps it, the scheduler's own optimizer
        is returned alone.
        """
        from accel.optimizer import AcceleratedOptimizer

        target: torch.optim.Optimizer = getattr(scheduler, "optimizer")  # noqa: B009 - any object with a scheduler's optimizer
        found: list[torch.optim.Optimizer] = [
            o
            for o in [*also, *self.optimizers]
            if isinstance(o, AcceleratedOptimizer) and o.optimizer is target
        ]
        return found or [target]

    def model_for_optimizer(self, index: int) -> torch.nn.Module | None:
        """The model paired with optimizer ``index`` in a checkpoint (the model of the same index)."""
        return self.models[index] if index < len(self.models) else None

    def clear(self) -> None:
        """Forget the prepared models, optimizers, schedulers and data loaders.

        Objects registered for checkpointing stay registered (as in Accelerate's ``free_memory``).
        """
        self.models.clear()
        self.optimizers.clear()
        self.schedulers.clear()
        self.dataloaders.clear()
        self._originals.clear()

    def __repr__(self) -> str:
        return (
            f"PreparedObjects(models={len(self.models)}, optimizers={len(self.optimizers)}, "
            f"schedulers={len(self.schedulers)}, dataloaders={len(self.dataloaders)}, "
            f"custom_objects={len(self.custom_objects)})"
        )
