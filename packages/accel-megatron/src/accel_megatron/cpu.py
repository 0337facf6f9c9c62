"""Running megatron-core on CPU processes: where its code names CUDA, use the CPU instead.

megatron-core assumes a GPU in a few generic places that are not kernels: buffers
allocated with ``device=torch.cuda.current_device()`` (attention workspace, gradient
buffers, pipeline receive buffers), a token counter made with ``device="cuda"`` in the
schedules, and the model-parallel RNG tracker built on the CUDA generator. On a
CPU-only run (``Accelerator(cpu=True)`` or no GPU) the backend executes megatron-core
inside :func:`cpu_execution`, which places those tensors on the CPU, and installs
:class:`CpuRNGStatesTracker` as megatron-core's RNG tracker. Real CUDA kernels
(fused kernels, TransformerEngine, Apex) are not emulated: they stay unavailable.
With a GPU none of this is used.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

import torch
from torch.overrides import TorchFunctionMode

if TYPE_CHECKING:
    from megatron.core.tensor_parallel.random import CudaRNGStatesTracker

_lock = threading.RLock()
_depth = 0
_saved: list[Any] = []  # torch.cuda.current_device and synchronize while redirected


def _is_cuda_device(device: torch.device | str | int) -> bool:
    if isinstance(device, int) and not isinstance(device, bool):
        return True  # a bare index means a CUDA device to torch
    try:
        return torch.device(device).type == "cuda"
    except (TypeError, RuntimeError):
        return False


class _CudaToCpu(TorchFunctionMode):
    """Rewrites ``device=<cuda>`` of every torch call made inside it to ``device="cpu"``.

    By torch's rule a call this mode intercepts runs without it, so code reached only
    through an intercepted Python-level function (``torch.autograd.backward``) is not
    redirected: the backend has megatron-core call the autograd engine directly
    (``deallocate_pipeline_outputs``), under which the mode stays active.
    """

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if (
            "device" in kwargs
            and kwargs["device"] is not None
            and _is_cuda_device(kwargs["device"])
        ):
            kwargs = {**kwargs, "device": "cpu"}
        return func(*args, **kwargs)


@contextlib.contextmanager
def cpu_execution(enabled: bool = True) -> Generator[None, None, None]:
    """Run the block with megatron-core's CUDA buffer placements redirected to the CPU.

    ``torch.cuda.current_device()`` answers device 0 and ``torch.cuda.synchronize()``
    does nothing while inside (both are restored on exit, re-entrant); tensors that
    torch is asked to create on a CUDA device are created on the CPU. A no-op when
    ``enabled`` is false (GPU runs).
    """
    global _depth
    if not enabled:
        yield
        return
    with _lock:
        if _depth == 0:
            _saved[:] = [torch.cuda.current_device, torch.cuda.synchronize]
            # patched on purpose for the block (restored below)
            torch.cuda.current_device = _current_device  # ty: ignore[invalid-assignment]
            torch.cuda.synchronize = _synchronize  # ty: ignore[invalid-assignment]
        _depth += 1
    try:
        with _CudaToCpu():
            yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                torch.cuda.current_device, torch.cuda.synchronize = _saved


def _current_device() -> int:
    return 0


def _synchronize(device: torch.device | str | int | None = None) -> None:
    return None


def _new_cpu_tracker_class() -> type[CudaRNGStatesTracker]:
    from megatron.core.tensor_parallel.random import CudaRNGStatesTracker

    class CpuRNGStatesTracker(CudaRNGStatesTracker):
        """megatron-core's model-parallel RNG tracker over the CPU generator.

        Same names and seeds as the CUDA tracker (``model-parallel-rng`` differs per
        tensor-parallel rank, so dropout in split layers draws different masks).
        """

        def add(self, name: str, seed: int) -> None:
            """Track a new CPU generator state seeded with ``seed`` under ``name``."""
            self._is_initialized = True
            if seed in self.seeds_:
                raise ValueError(f"RNG seed {seed} is already tracked")
            if name in self.states_:
                raise ValueError(f"RNG state {name} is already tracked")
            self.seeds_.add(seed)
            generator = torch.Generator()
            generator.manual_seed(seed)
            self.states_[name] = generator.get_state()

        @contextlib.contextmanager
        def fork(self, name: str = "model-parallel-rng") -> Generator[None, None, None]:
            """Draw from the CPU generator state ``name`` inside the block, then restore."""
            if name not in self.states_:
                raise KeyError(f"RNG state {name} is not tracked")
            original = torch.get_rng_state()
            torch.set_rng_state(self.states_[name])
            try:
                yield
            finally:
                self.states_[name] = torch.get_rng_state()
                torch.set_rng_state(original)

    return CpuRNGStatesTracker


def _no_cuda_rng_state(*args: object, **kwargs: object) -> torch.Tensor:
    return torch.empty(0, dtype=torch.uint8)


def _ignore_cuda_rng_state(*args: object, **kwargs: object) -> None:
    return None


def install_cpu_rng_tracker(seed: int) -> CudaRNGStatesTracker:
    """Make a :class:`CpuRNGStatesTracker` megatron-core's RNG tracker, seeded like ``model_parallel_cuda_manual_seed``.

    For a CPU-only process. Activation recomputation saves and restores the CPU
    generator and the tracker's states as usual; the CUDA generator's save and restore
    (there is none) become no-ops.
    """
    from megatron.core import parallel_state as ps
    from megatron.core.tensor_parallel import random as mrandom

    tracker = _new_cpu_tracker_class()()
    tp_rank = ps.get_tensor_model_parallel_rank()
    ep_rank = (
        ps.get_expert_model_parallel_rank() if hasattr(ps, "get_expert_model_parallel_rank") else 0
    )
    offset = seed + 2718
    tracker.add("data-parallel-rng", seed)
    tracker.add("model-parallel-rng", offset + tp_rank)
    tracker.add("expert-parallel-rng", offset + 100 + ep_rank * 1000 + tp_rank + 1)
    mrandom._CUDA_RNG_STATE_TRACKER = tracker
    mrandom._CUDA_RNG_STATE_TRACKER_INITIALIZED = True
    # patched on purpose: megatron-core's RNG state helpers, on the CPU generator
    mrandom._get_cuda_rng_state = _no_cuda_rng_state  # ty: ignore[invalid-assignment]
    mrandom._set_cuda_rng_state = _ignore_cuda_rng_state  # ty: ignore[invalid-assignment]
    return tracker
