"""The whole run state a healing replica group receives, live, from a peer.

What ``save_state`` writes, gathered in memory instead of files: every prepared model and
optimizer, the schedulers, the precision's scaler, the objects registered with
``register_for_checkpointing``, the data loaders' positions, the RNG states and the step
counter. torchft sends it tensor by tensor over the replica groups' gloo group; nothing is
written or read on disk.
"""

from __future__ import annotations

from typing import Any

from accel.backends import Backend
from accel.rng import capture_rng_state, restore_rng_state


def capture(backend: Backend) -> dict[str, Any]:
    """The run state of this process, as the state dicts of what ``backend.context`` prepared."""
    ctx = backend.context
    prepared = ctx.prepared
    return {
        "models": [backend.unwrap_model(m).state_dict() for m in prepared.models],
        "optimizers": [o.state_dict() for o in prepared.optimizers],
        "schedulers": [s.state_dict() for s in prepared.schedulers],
        "scaler": ctx.precision.state_dict(),
        "custom_objects": [o.state_dict() for o in prepared.custom_objects],
        "dataloaders": [
            d.state_dict() if hasattr(d, "state_dict") else None for d in prepared.dataloaders
        ],
        "rng": capture_rng_state(),
        "gradient_step": ctx.gradient_state.step,
    }


def restore(backend: Backend, state: dict[str, Any]) -> None:
    """Load ``state`` (from :func:`capture` on a peer) into what ``backend.context`` prepared."""
    ctx = backend.context
    prepared = ctx.prepared
    _check_counts(state, prepared)
    for model, weights in zip(prepared.models, state["models"]):
        backend.unwrap_model(model).load_state_dict(weights)
    for optimizer, values in zip(prepared.optimizers, state["optimizers"]):
        optimizer.load_state_dict(values)
    for scheduler, values in zip(prepared.schedulers, state["schedulers"]):
        scheduler.load_state_dict(values)
    if state["scaler"] is not None:
        ctx.precision.load_state_dict(state["scaler"])
    for obj, values in zip(prepared.custom_objects, state["custom_objects"]):
        obj.load_state_dict(values)
    for loader, position in zip(prepared.dataloaders, state["dataloaders"]):
        if position is not None and hasattr(loader, "load_state_dict"):
            loader.load_state_dict(position)
    restore_rng_state(state["rng"])
    ctx.gradient_state.step = state["gradient_step"]


def _check_counts(state: dict[str, Any], prepared: Any) -> None:
    """Every group must have prepared the same objects: a mismatch is a script difference."""
    for kind in ("models", "optimizers", "schedulers", "custom_objects", "dataloaders"):
        mine, theirs = len(getattr(prepared, kind)), len(state[kind])
        if mine != theirs:
            raise RuntimeError(
                f"accel-ft: the peer sent {theirs} {kind} and this group prepared {mine}: "
                "every replica group must run the same script and prepare the same objects"
            )


__all__ = ["capture", "restore"]
