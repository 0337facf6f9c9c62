"""Seeding and RNG state: ``set_seed``, capture/restore for checkpoints, synchronisation across ranks."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TypedDict

import numpy as np
import torch


class NumpyRngState(TypedDict):
    """numpy's legacy RNG state as plain types and a tensor (loadable with ``weights_only``)."""

    kind: str
    keys: torch.Tensor
    pos: int
    has_gauss: int
    cached_gaussian: float


class _RngStateBase(TypedDict):
    python: tuple[int, Sequence[int], float | None]  # random.getstate()
    numpy: NumpyRngState
    torch: torch.Tensor


class RngState(_RngStateBase, total=False):
    """Every RNG state of a process (:func:`capture_rng_state`); the device ones where present."""

    cuda: list[torch.Tensor]
    xpu: list[torch.Tensor]


def set_seed(seed: int, device_specific: bool = False, deterministic: bool = False) -> None:
    """Seed python, numpy and torch (all devices); ``device_specific`` adds the process index."""
    if device_specific:
        from accel.state import PartialState

        seed += PartialState().process_index
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
    if deterministic:
        torch.use_deterministic_algorithms(True)


def capture_rng_state() -> RngState:
    """Every RNG state of this process, as plain types and tensors (loadable with ``weights_only``)."""
    legacy = np.random.get_state(legacy=True)
    assert isinstance(legacy, tuple)  # legacy=True: the 5-tuple
    kind, keys, pos, has_gauss, cached = legacy
    state: RngState = {
        "python": random.getstate(),
        "numpy": {
            "kind": kind,
            "keys": torch.from_numpy(keys.astype(np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached),
        },
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    if hasattr(torch, "xpu") and torch.xpu.is_available():
        state["xpu"] = torch.xpu.get_rng_state_all()
    return state


def restore_rng_state(state: RngState) -> None:
    """Restore what :func:`capture_rng_state` returned."""
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    numpy_state = state["numpy"]
    np.random.set_state(
        (
            numpy_state["kind"],
            numpy_state["keys"].numpy().astype(np.uint32),
            numpy_state["pos"],
            numpy_state["has_gauss"],
            numpy_state["cached_gaussian"],
        )
    )
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    if "xpu" in state and hasattr(torch, "xpu") and torch.xpu.is_available():
        torch.xpu.set_rng_state_all(state["xpu"])


def derived_seed(run_state: torch.Tensor, rank: int, step: int) -> int:
    """A seed for ``rank`` at ``step`` derived from a run's RNG state (a rank a resize added).

    The same inputs give the same seed on every machine and at every restart, and different
    ranks or steps give unrelated seeds.
    """
    import hashlib

    digest = hashlib.sha256(run_state.numpy().tobytes())
    digest.update(f":{rank}:{step}".encode())
    return int.from_bytes(digest.digest()[:8], "little") & (2**63 - 1)


def synchronize_rng_state(
    rng_type: str = "torch", generator: torch.Generator | None = None
) -> None:
    """Copy the main process's RNG state of ``rng_type`` to every process."""
    from accel.distributed.operations import broadcast_object_list

    rng_type = str(rng_type)
    if rng_type == "torch":
        torch.set_rng_state(broadcast_object_list([torch.get_rng_state()])[0])
    elif rng_type == "cuda":
        torch.cuda.set_rng_state(broadcast_object_list([torch.cuda.get_rng_state()])[0])
    elif rng_type == "xpu":
        torch.xpu.set_rng_state(broadcast_object_list([torch.xpu.get_rng_state()])[0])
    elif rng_type == "generator":
        if generator is None:
            raise ValueError("synchronize_rng_state('generator') needs generator=")
        generator.set_state(broadcast_object_list([generator.get_state()])[0])
    else:
        raise ValueError(f"unknown rng_type {rng_type!r}: use torch, cuda, xpu or generator")


def synchronize_rng_states(rng_types: list[str], generator: torch.Generator | None = None) -> None:
    """:func:`synchronize_rng_state` for each of ``rng_types``."""
    for rng_type in rng_types:
        synchronize_rng_state(rng_type, generator=generator)
