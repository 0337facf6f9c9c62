"""``ProfileKwargs``: how ``accelerator.profile()`` configures ``torch.profiler.profile``.

This module imports nothing heavy: torch is imported only when a profiler is built.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from accel.kwargs import KwargsHandler

if TYPE_CHECKING:
    from torch.profiler import ProfilerAction, ProfilerActivity, profile

ACTIVITIES: dict[str, str] = {
    "cpu": "CPU",
    "cuda": "CUDA",
    "xpu": "XPU",
    "mtia": "MTIA",
    "hpu": "HPU",
    "privateuse1": "PrivateUse1",
}
"""``activities`` names accepted by :class:`ProfileKwargs` -> ``torch.profiler.ProfilerActivity`` member."""

SCHEDULE_KEYS: tuple[str, ...] = (
    "wait",
    "warmup",
    "active",
    "repeat",
    "skip_first",
    "skip_first_wait",
)
"""Keys ``schedule_option`` accepts (the arguments of ``torch.profiler.schedule``)."""

REQUIRED_SCHEDULE_KEYS: tuple[str, ...] = ("wait", "warmup", "active")
"""Keys ``schedule_option`` must contain."""


class ProfilerConfigError(ValueError):
    """A :class:`ProfileKwargs` field has a value the profiler cannot use; the message says which."""


def _activity_name(item: object) -> str:
    """``"cpu"`` for ``"cpu"``, ``"CPU"`` or ``ProfilerActivity.CPU``."""
    if isinstance(item, str):
        return item.lower()
    name = getattr(item, "name", None)
    if isinstance(name, str):
        return name.lower()
    raise ProfilerConfigError(
        f"ProfileKwargs(activities=...): {item!r} is not an activity name; use some of {sorted(ACTIVITIES)}"
    )


@dataclass
class ProfileKwargs(KwargsHandler):
    """Arguments of ``torch.profiler.profile`` used by ``accelerator.profile()``.

    Pass it in ``Accelerator(kwargs_handlers=[ProfileKwargs(...)])`` or directly to
    ``accelerator.profile(ProfileKwargs(...))``.

    Args:
        activities: device activities to profile, among ``"cpu"``, ``"cuda"``, ``"xpu"``,
            ``"mtia"``, ``"hpu"``, ``"privateuse1"`` (or ``ProfilerActivity`` members). Those
            this machine lacks are dropped with a warning (the CPU is profiled when none
            is left). ``None``: the CPU plus the accelerator present, if any.
        schedule_option: arguments of ``torch.profiler.schedule`` for long jobs: ``wait``,
            ``warmup``, ``active`` (required), ``repeat``, ``skip_first``, ``skip_first_wait``.
            Call ``prof.step()`` once per iteration.
        on_trace_ready: called with the profiler each time a trace is ready (at the end of
            each ``active`` window, or at the end of the profile without a schedule).
        record_shapes: record the input shapes of operators.
        profile_memory: record the memory allocated and freed by operators.
        with_stack: record Python source locations of operators.
        with_flops: estimate FLOPs of matrix multiplications and 2D convolutions.
        with_modules: record the ``nn.Module`` hierarchy of operators.
        output_trace_dir: directory where every process writes its own Chrome trace:
            ``profile_<rank>.json`` when the profile ends, or
            ``profile_<rank>_step<N>.json`` each time a scheduled trace is ready.
    """

    activities: list[str | ProfilerActivity] | None = None
    schedule_option: dict[str, int] | None = None
    on_trace_ready: Callable[[profile], object] | None = None
    record_shapes: bool = False
    profile_memory: bool = False
    with_stack: bool = False
    with_flops: bool = False
    with_modules: bool = False
    output_trace_dir: str | os.PathLike | None = None

    def __post_init__(self) -> None:
        if self.activities is not None:
            given: object = self.activities  # a list, or one name or member
            if isinstance(given, (str, bytes)) or not isinstance(given, Iterable):
                given = [given]
            items = list(given)
            for item in items:
                if _activity_name(item) not in ACTIVITIES:
                    raise ProfilerConfigError(
                        f"ProfileKwargs(activities=...): unknown activity {item!r}; use some of {sorted(ACTIVITIES)}"
                    )
            self.activities = items
        if self.schedule_option is not None:
            self._check_schedule_option(self.schedule_option)
        if self.on_trace_ready is not None and not callable(self.on_trace_ready):
            raise ProfilerConfigError(
                f"ProfileKwargs(on_trace_ready=...): expected a function taking the profiler, got {self.on_trace_ready!r}"
            )

    @staticmethod
    def _check_schedule_option(option: object) -> None:
        if not isinstance(option, dict):
            raise ProfilerConfigError(
                f"ProfileKwargs(schedule_option=...): expected a dict with keys {list(SCHEDULE_KEYS)}, got {option!r}"
            )
        unknown = [key for key in option if key not in SCHEDULE_KEYS]
        if unknown:
            raise ProfilerConfigError(
                f"ProfileKwargs(schedule_option=...): unknown key(s) {unknown}; allowed keys: {list(SCHEDULE_KEYS)}"
            )
        missing = [key for key in REQUIRED_SCHEDULE_KEYS if key not in option]
        if missing:
            raise ProfilerConfigError(
                f"ProfileKwargs(schedule_option=...): missing key(s) {missing}; "
                f"{list(REQUIRED_SCHEDULE_KEYS)} are required, e.g. {{'wait': 1, 'warmup': 1, 'active': 3}}"
            )
        for key, value in option.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ProfilerConfigError(
                    f"ProfileKwargs(schedule_option=...): {key!r} must be an integer >= 0, got {value!r}"
                )
        if option["active"] < 1:
            raise ProfilerConfigError(
                "ProfileKwargs(schedule_option=...): 'active' must be >= 1 (the number of profiled steps per cycle)"
            )

    # -- translation to torch.profiler ------------------------------------------
    def profiler_activities(self, *, stacklevel: int = 2) -> list[ProfilerActivity]:
        """The ``ProfilerActivity`` list to profile; activities this machine lacks are dropped with a warning.

        ``stacklevel`` as in :func:`warnings.warn`, counted from the caller of this method.
        """
        import torch

        supported = set(torch.profiler.supported_activities())
        if self.activities is None:
            names = ["cpu"] + [name for name in ("cuda", "xpu", "hpu", "mtia") if _present(name)]
        else:
            names = [_activity_name(item) for item in self.activities]
        result: list[ProfilerActivity] = []
        dropped: list[str] = []
        for name in dict.fromkeys(names):
            activity = getattr(torch.profiler.ProfilerActivity, ACTIVITIES[name], None)
            if activity is None or activity not in supported or not _present(name):
                dropped.append(name)
                continue
            result.append(activity)
        if not result:  # torch would profile its defaults anyway: say so, and pick the CPU
            result.append(torch.profiler.ProfilerActivity.CPU)
        if dropped:
            warnings.warn(
                f"ProfileKwargs: profiler activities {dropped} are not available on this machine and are skipped; "
                f"profiling {[a.name.lower() for a in result]}",
                UserWarning,
                stacklevel=stacklevel,
            )
        return result

    def profiler_schedule(self) -> Callable[[int], ProfilerAction] | None:
        """``torch.profiler.schedule(**schedule_option)``, or None without a schedule."""
        if self.schedule_option is None:
            return None
        self._check_schedule_option(self.schedule_option)
        import torch

        return torch.profiler.schedule(**self.schedule_option)

    def build(
        self, on_trace_ready: Callable[[profile], object] | None = None, *, stacklevel: int = 2
    ) -> profile:
        """A new ``torch.profiler.profile`` configured from these fields (not started).

        ``on_trace_ready`` overrides the field of the same name; ``stacklevel`` places the
        warning about dropped activities (see :meth:`profiler_activities`).
        """
        import torch

        return torch.profiler.profile(
            activities=self.profiler_activities(stacklevel=stacklevel + 1),
            schedule=self.profiler_schedule(),
            on_trace_ready=on_trace_ready if on_trace_ready is not None else self.on_trace_ready,
            record_shapes=self.record_shapes,
            profile_memory=self.profile_memory,
            with_stack=self.with_stack,
            with_flops=self.with_flops,
            with_modules=self.with_modules,
        )


def _present(name: str) -> bool:
    """Whether the device behind activity ``name`` is usable in this process."""
    if name == "cpu":
        return True
    if name == "privateuse1":
        return True  # custom backends: trust torch.profiler.supported_activities()
    import torch

    module = getattr(torch, name, None)
    is_available = getattr(module, "is_available", None)
    try:
        return bool(is_available()) if callable(is_available) else False
    except Exception:
        return False
