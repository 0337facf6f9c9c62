"""``accelerator.throughput``: samples, tokens, optimizer steps and FLOPs per second, and MFU.

What is counted, and where (so that gradient accumulation, several processes and
micro-batches do not change the figures):

- **samples and tokens** from every forward of the trained model (the first prepared model
  that runs in training mode with gradients on; evaluation forwards are not counted): the
  batch size of its input, and the real tokens of its ``attention_mask`` (its sum, kept on
  the device until the next report), else the size of ``input_ids``. A loop whose model
  sees other inputs calls :meth:`ThroughputMonitor.update` instead. A step split into
  micro-batches is counted micro-batch by micro-batch and adds up to the whole batch; an
  attempt that is thrown away and retried is taken back with :meth:`~ThroughputMonitor.mark`
  and :meth:`~ThroughputMonitor.rewind`;
- **optimizer steps** when the first prepared optimizer really steps (a torch step
  post-hook: accumulating micro-batches do not step);
- **FLOPs** as FLOPs per sample, measured once (:meth:`~ThroughputMonitor.measure_flops`)
  or given (``ThroughputKwargs(flops_per_sample=...)``), times the samples counted;
- **time** on the host clock, read after the device has finished its queued work, at the
  end of the warm-up steps and at each report.

Every ``log_every`` optimizer steps (on every process at the same step) the counts of the
window are summed over the processes in one small all-reduce, :attr:`ThroughputMonitor.metrics`
is updated and the values go to the started trackers (``accelerator.log``).
"""

from __future__ import annotations

import atexit
import inspect
import time
import weakref
from collections.abc import Callable, Generator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from accel.kwargs import KwargsHandler
from accel.throughput import peaks
from accel.throughput.flops import measure_flops as _measure_flops

if TYPE_CHECKING:
    from accel.throughput.summary import RunRecord

PREFIX = "throughput/"
"""Prefix of every logged name."""


@dataclass
class ThroughputKwargs(KwargsHandler):
    """Settings of ``accelerator.throughput`` (``Accelerator(kwargs_handlers=[ThroughputKwargs(...)])``).

    ``log_every``: optimizer steps between two reports (each one all-reduce of 9 numbers).
    ``warmup_steps``: first optimizer steps left out of every rate (compilation, caches).
    ``peak_flops``: this device's peak FLOP/s, replacing the table's (needed for MFU on a
    device the table does not know). ``flops_per_sample``: FLOPs of one sample's forward
    and backward, when known instead of measured. ``log_to_trackers``: send each report to
    the started trackers. ``enabled=False`` counts nothing and installs no hook.
    """

    enabled: bool = True
    log_every: int = 10
    warmup_steps: int = 1
    peak_flops: float | None = None
    flops_per_sample: float | None = None
    log_to_trackers: bool = True

    def __post_init__(self) -> None:
        if self.log_every < 1:
            raise ValueError(f"ThroughputKwargs(log_every={self.log_every}): use 1 or more")
        if self.warmup_steps < 0:
            raise ValueError(f"ThroughputKwargs(warmup_steps={self.warmup_steps}): use 0 or more")
        for name in ("peak_flops", "flops_per_sample"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"ThroughputKwargs({name}={value!r}): give a number above 0")


def batch_counts(
    args: tuple[object, ...], kwargs: Mapping[str, object]
) -> tuple[int, torch.Tensor | int | None]:
    """``(samples, tokens)`` of a model called with ``args`` / ``kwargs``.

    Samples: the first dimension of ``attention_mask``, ``input_ids`` or the first tensor
    argument (a dict passed as the one argument is read like keywords). Tokens: the sum of
    a 2-D ``attention_mask`` (a device tensor, not read back), else the size of
    ``input_ids``, else None (unknown).
    """
    if not kwargs and len(args) == 1 and isinstance(args[0], Mapping):
        kwargs, args = args[0], ()
    mask, ids = kwargs.get("attention_mask"), kwargs.get("input_ids")
    first = next(
        (
            t
            for t in (mask, ids, *args, *kwargs.values())
            if isinstance(t, torch.Tensor) and t.dim() > 0
        ),
        None,
    )
    samples = 0 if first is None else int(first.shape[0])
    if isinstance(mask, torch.Tensor) and mask.dim() == 2:
        return samples, mask.sum()
    if isinstance(ids, torch.Tensor):
        return samples, ids.numel()
    return samples, None


class _Hook:
    """A hook calling a monitor's method through a weak reference.

    Copied or pickled with its module or optimizer (``copy.deepcopy(model)``,
    ``torch.save(model)``), it becomes a hook that does nothing.
    """

    def __init__(self, monitor: ThroughputMonitor, method: str):
        self.ref = weakref.ref(monitor)
        self.method = method

    def __call__(self, *args: object) -> None:
        monitor = self.ref()
        if monitor is not None:
            getattr(monitor, self.method)(*args)

    def __reduce__(self) -> tuple:
        return (_InertHook, ())


class _InertHook:
    """What a copied or pickled monitor hook becomes: a hook that does nothing."""

    def __call__(self, *args: object) -> None:
        return None


@dataclass
class _Counts:
    samples: int = 0
    tokens: int = 0
    tokens_on_device: torch.Tensor | None = None  # the attention masks' sums, not read back yet
    tokens_unknown: bool = False

    def copy(self) -> _Counts:
        return _Counts(self.samples, self.tokens, self.tokens_on_device, self.tokens_unknown)

    def settle(self) -> None:
        """Read the device sum back (after the device finished): one number on the host."""
        if self.tokens_on_device is not None:
            self.tokens += int(self.tokens_on_device.item())
            self.tokens_on_device = None


def _stepping_optimizer(obj: object) -> torch.optim.Optimizer | None:
    """The torch optimizer that really steps under ``obj``, or None.

    Unwraps accel's ``AcceleratedOptimizer`` (``.optimizer``) and wrappers that subclass
    ``Optimizer`` without running its ``__init__`` and hold the real one as ``.optim`` (torchft's
    ``OptimizerWrapper``, which steps it only when the quorum commits): only an optimizer built
    by ``Optimizer.__init__`` has the table of step hooks.
    """
    for _ in range(4):  # a few layers of wrappers at most
        if isinstance(obj, torch.optim.Optimizer) and hasattr(obj, "_optimizer_step_post_hooks"):
            return obj
        obj = getattr(obj, "optimizer", None) or getattr(obj, "optim", None)
        if obj is None:
            return None
    return None


class ThroughputMonitor:
    """Throughput and model-FLOPs utilisation of a training run (``accelerator.throughput``).

    The :class:`~accel.Accelerator` makes one and shows it the objects it prepares
    (:meth:`watch`). In the loop: :attr:`metrics` (the latest report), :attr:`steps`,
    :meth:`summary` (this process, the whole run). ``reduce`` sums a float64 tensor over
    the processes (the backend's ``reduce``), ``log(values, step=)`` sends a report to the
    trackers, ``clock`` is the time source (seconds).
    """

    def __init__(
        self,
        options: ThroughputKwargs | None = None,
        *,
        device: torch.device | str = "cpu",
        process_index: int = 0,
        num_processes: int = 1,
        mixed_precision: str | None = None,
        reduce: Callable[[torch.Tensor], torch.Tensor] | None = None,
        log: Callable[..., object] | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ):
        self.options = options or ThroughputKwargs()
        self.device = torch.device(device)
        self.process_index = process_index
        self.num_processes = num_processes
        self.mixed_precision = mixed_precision
        # held weakly when they are bound methods (the backend's reduce, the trackers' log): the
        # monitor outlives its Accelerator until exit (for the record) and keeps nothing alive
        self._reduce = _weakly(reduce)
        self._log = _weakly(log)
        self.clock = clock
        self.flops_per_sample: float | None = self.options.flops_per_sample
        """FLOPs of one sample's forward and backward (measured or given), or None."""
        self.metrics: dict[str, float] = {}
        """The latest report: ``throughput/...`` names to values (empty before the first)."""
        self.steps = 0
        """Optimizer steps taken."""
        self._model: weakref.ref | None = None  # the trained model (weakly, as below)
        self._optimizer: weakref.ref | None = None
        self._manual = False
        self._paused = False
        self._recorded = False
        self._peak: tuple[float | None, str] | None = None
        self.reset()

    def __getstate__(self) -> dict[str, object]:
        """A pickled monitor (with its Accelerator) keeps its counts, not its links to the run."""
        state = dict(self.__dict__)
        state.update(_reduce=None, _log=None, _model=None, _optimizer=None, clock=None)
        return state

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self._reduce = self._log = _weakly(None)
        self.clock = time.perf_counter

    # -- what is watched -------------------------------------------------------
    def watch(self, obj: object) -> None:
        """Count the forwards of a prepared model and the steps of the first prepared optimizer."""
        if not self.options.enabled:
            return
        if isinstance(obj, torch.nn.Module):
            obj.register_forward_pre_hook(_Hook(self, "_on_forward"), with_kwargs=True)
        elif (self._optimizer is None or self._optimizer() is None) and (
            inner := _stepping_optimizer(obj)
        ) is not None:
            self._optimizer = weakref.ref(inner)
            inner.register_step_post_hook(_Hook(self, "optimizer_step"))

    def _on_forward(
        self, module: torch.nn.Module, args: tuple[object, ...], kwargs: dict[str, object]
    ) -> None:
        if self._paused or self._manual or not module.training or not torch.is_grad_enabled():
            return
        model = None if self._model is None else self._model()
        if model is None:
            self._model = weakref.ref(module)
        elif module is not model:
            return
        samples, tokens = batch_counts(args, kwargs)
        self._add(samples, tokens)

    def update(self, samples: int = 0, tokens: int | torch.Tensor | None = None) -> None:
        """Count ``samples`` and ``tokens`` (an int or a device tensor) yourself.

        From the first call on, forwards are no longer counted: call it for every
        micro-batch (or once per optimizer step with the step's counts of this process).
        """
        self._manual = True
        self._add(samples, tokens)

    def _add(self, samples: int, tokens: torch.Tensor | int | None) -> None:
        if self._start is None and self.options.warmup_steps == 0:
            self._start = self._window_start = self._now()
        counts = self._counts
        counts.samples += samples
        if tokens is None:
            counts.tokens_unknown = True
        elif isinstance(tokens, torch.Tensor):
            held = counts.tokens_on_device
            if held is None:
                counts.tokens_on_device = tokens
            elif held.device == tokens.device:
                counts.tokens_on_device = held + tokens  # a new tensor: marks keep theirs
            else:
                counts.tokens += int(tokens.item())
        else:
            counts.tokens += int(tokens)

    def mark(self) -> _Counts:
        """The counts now, for :meth:`rewind` (before an attempt that may be retried)."""
        return self._counts.copy()

    def rewind(self, mark: _Counts) -> None:
        """Forget what was counted since ``mark`` (an attempt thrown away before its retry)."""
        self._counts = mark.copy()

    # -- steps and reports -----------------------------------------------------
    def optimizer_step(self, *_: object) -> None:
        """Count one optimizer step: done by a hook on the first prepared torch optimizer.

        Call it yourself after each step only where accel sees no torch optimizer step
        (DeepSpeed ZeRO's own optimizer); then the run's record is written at exit too.
        """
        if not self._recorded:  # the first step: this run leaves a record at exit
            self._recorded = True
            _write_at_exit(self)
        self.steps = steps = self.steps + 1
        warmup = self.options.warmup_steps
        if steps < warmup:
            return
        if steps == warmup:  # the rates start now: what came before was warm-up
            self._peak_and_dtype()  # decided while the model is there to say its dtype
            self._start = self._window_start = self._now()
            self._counts = _Counts()
            self._reported = _Counts()
            self._last_step_time = self._start
            return
        self._last_step_time = self.clock()
        if (steps - warmup) % self.options.log_every == 0:
            self.report()

    def report(self) -> dict[str, float]:
        """Sum this window over the processes, update :attr:`metrics` and log them.

        Runs by itself every ``log_every`` optimizer steps; call it yourself only on every
        process at once (it is a collective with several processes).
        """
        if self._start is None:  # still warming up: nothing is timed yet
            return self.metrics
        now = self._now()
        self._counts.settle()
        counts, last = self._counts, self._reported
        samples, tokens = counts.samples - last.samples, counts.tokens - last.tokens
        elapsed = now - self._window_start
        steps = self.steps - self._reported_steps
        flops = None if self.flops_per_sample is None else samples * self.flops_per_sample
        peak = self.peak_flops
        local = [samples, tokens, counts.tokens_unknown, flops or 0.0, flops is None]
        local += [elapsed, peak or 0.0, peak is None, 1]
        total = [float(v) for v in local]
        reduce = self._reduce()
        if self.num_processes > 1 and reduce is not None:
            vector = torch.tensor(total, dtype=torch.float64, device=self.device)
            total = reduce(vector).tolist()
        m: dict[str, float] = {}
        if elapsed > 0:
            mean_elapsed = total[5] / total[8]  # total[8]: the processes that reported
            m["steps_per_second"] = steps / elapsed
            m["samples_per_second"] = total[0] / mean_elapsed
            m["process_samples_per_second"] = samples / elapsed
            if not total[2]:
                m["tokens_per_second"] = total[1] / mean_elapsed
                m["process_tokens_per_second"] = tokens / elapsed
            if not total[4]:
                m["flops_per_step"] = total[3] / max(steps, 1)
                m["flops_per_second"] = total[3] / mean_elapsed
                if not total[7]:
                    m["mfu"] = total[3] / mean_elapsed / total[6]
        self.metrics = {PREFIX + k: v for k, v in m.items()}
        self._reported = counts.copy()
        self._reported_steps = self.steps
        self._window_start = now
        log = self._log()
        if self.metrics and self.options.log_to_trackers and log is not None:
            log(self.metrics, step=self.steps)
        return self.metrics

    def _now(self) -> float:
        """The clock, once the device has run what was queued (the work being timed)."""
        if self.device.type not in ("cpu", "meta"):
            module = getattr(torch, self.device.type, None)
            if module is not None and hasattr(module, "synchronize"):
                module.synchronize(self.device)
        return self.clock()

    def reset(self) -> None:
        """Start counting afresh (the warm-up steps included)."""
        self.steps = 0
        self.metrics = {}
        self._counts = _Counts()
        self._reported = _Counts()
        self._reported_steps = self.options.warmup_steps
        self._start: float | None = None
        self._window_start = 0.0
        self._last_step_time: float | None = None

    # -- FLOPs and the peak ----------------------------------------------------
    def measure_flops(
        self,
        model: torch.nn.Module,
        *args: object,
        loss_fn: Callable[[Any], torch.Tensor] | None = None,
        **kwargs: Any,
    ) -> int:
        """Count the FLOPs of one forward and backward of ``model`` on a batch, once.

        ``model(*args, **kwargs)`` is run under ``FlopCounterMode`` on the meta device
        (or, when the model reads its inputs' values, once for real, ``.grad`` untouched:
        :func:`accel.throughput.flops.measure_flops`); the FLOPs divided by the batch's
        samples become :attr:`flops_per_sample`. Returns the batch's FLOPs. Call it with a
        model that is not sharded (before ``prepare`` for FSDP) on the same shape of batch
        as training.
        """
        samples, _ = batch_counts(args, kwargs)
        if samples < 1:
            raise ValueError(
                "measure_flops: the batch has no tensor to count samples from: pass the "
                "model's inputs, or give ThroughputKwargs(flops_per_sample=...)"
            )
        self._paused = True
        try:
            flops = _measure_flops(model, *args, loss_fn=loss_fn, **kwargs)
        finally:
            self._paused = False
        self.flops_per_sample = flops / samples
        return flops

    @property
    def peak_flops(self) -> float | None:
        """This device's dense peak FLOP/s in the run's compute dtype, or None (unknown)."""
        return self._peak_and_dtype()[0]

    @property
    def compute_dtype(self) -> str:
        """The dtype the run's matrix multiplications run in (the peak's column)."""
        return self._peak_and_dtype()[1]

    def _peak_and_dtype(self) -> tuple[float | None, str]:
        if self._peak is None:
            model = None if self._model is None else self._model()
            parameter = None if model is None else next(iter(model.parameters()), None)
            dtype = peaks.compute_dtype(self.mixed_precision, getattr(parameter, "dtype", None))
            peak = self.options.peak_flops
            if peak is None:
                name = peaks.device_name(self.device)
                peak = None if name is None else peaks.peak_flops(name, dtype)
            if model is None:  # the model's dtype is not known yet: decide again later
                return peak, dtype
            self._peak = (peak, dtype)
        return self._peak

    # -- the whole run -----------------------------------------------------------
    def summary(self) -> RunRecord:
        """This process's whole run after the warm-up: counts, seconds, FLOPs, peak.

        ``rank``, ``steps`` (all optimizer steps), ``timed_steps``, ``samples``, ``tokens``
        (None: unknown), ``flops`` (None: not measured), ``seconds``, ``peak_flops`` (None:
        unknown), ``device``, ``dtype``. Reads the device's token count back.
        """
        counts = self._counts
        counts.settle()
        start, end = self._start, self._last_step_time
        seconds = 0.0 if start is None or end is None else max(end - start, 0.0)
        flops = None if self.flops_per_sample is None else counts.samples * self.flops_per_sample
        return {
            "rank": self.process_index,
            "steps": self.steps,
            "timed_steps": max(self.steps - self.options.warmup_steps, 0),
            "samples": counts.samples,
            "tokens": None if counts.tokens_unknown else counts.tokens,
            "flops": flops,
            "seconds": seconds,
            "peak_flops": self.peak_flops,
            "device": peaks.device_name(self.device) or self.device.type,
            "dtype": self.compute_dtype,
        }

    @contextmanager
    def paused(self) -> Generator[None, None, None]:
        """Forwards inside are not counted (extra forwards that are not training work)."""
        previous, self._paused = self._paused, True
        try:
            yield
        finally:
            self._paused = previous


def _weakly(function: Callable | None) -> Callable[[], Callable | None]:
    """A getter of ``function``, holding it weakly when it is a bound method."""
    if inspect.ismethod(function):
        return weakref.WeakMethod(function)
    return lambda: function


_latest: ThroughputMonitor | None = None
"""The monitor that took a first optimizer step last: it writes the record at exit. Held
strongly (a run's Accelerator may be gone by then); it holds its model, optimizer and
Accelerator's methods weakly, so it keeps only its counts alive."""


def _write_at_exit(monitor: ThroughputMonitor) -> None:
    """Have the monitor that stepped last write its record when the process ends (``accel launch``)."""
    global _latest
    if _latest is None:
        atexit.register(_write_record)
    _latest = monitor


def _write_record() -> None:
    from accel.throughput import summary

    monitor = _latest
    directory = summary.record_directory()
    if monitor is None or directory is None or monitor.steps == 0:
        return
    try:
        summary.write_record(directory, monitor.summary())
    except (OSError, RuntimeError) as exc:  # the run is over: say so, and leave the exit as it is
        import sys

        sys.stderr.write(f"accel: the throughput record was not written: {exc}\n")


__all__ = ["PREFIX", "ThroughputKwargs", "ThroughputMonitor", "batch_counts"]
