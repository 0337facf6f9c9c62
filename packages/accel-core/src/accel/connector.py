"""The one resolver: configuration in, a precision and a backend out, in a fixed order.

The Accelerator asks :class:`Connector` (modelled on Lightning Fabric's ``_Connector``)
and nothing else which :class:`~accel.precision.Precision` and which
:class:`~accel.backends.Backend` to use. Configuration comes from three places: the
Accelerator's arguments, the ``ACCEL_*`` environment that ``accel launch`` writes from
a config file and its flags, and plugin objects (``fsdp_plugin=...``). The order:

**Precision** (the ``mixed_precision`` name, kept by the process-wide
:class:`~accel.state.AcceleratorState`):

1. ``Accelerator(mixed_precision=...)``;
2. ``ACCEL_MIXED_PRECISION``;
3. ``"no"``.

The name is looked up among the installed precisions (core's ``no``/``fp16``/``bf16``,
then plugins': ``fp8`` from accel-fp8, ...); an unknown name raises ``ValueError``, a
name a known package provides raises :class:`~accel.errors.MissingPluginError`.

**Backend**:

1. ``ACCEL_BACKEND=<name>`` picks the installed backend whose ``Backend.name`` it is
   (to use a third-party backend for a distributed type another one also serves);
2. otherwise the backend serving the distributed type, which the state resolves as:
   a plugin object passed in code (``fsdp_plugin``, ``deepspeed_plugin``,
   ``megatron_lm_plugin``) > ``ACCEL_DISTRIBUTED_TYPE`` from the launcher > the number of
   processes and the device (``NO``, ``MULTI_CPU``, ``MULTI_GPU``, ...). Among plugins
   serving the same type, entry points override core's default plugins;
3. a multi-process type (``MULTI_*``) with no installed backend gets a
   :class:`MissingBackend`: data loaders and schedulers are prepared (distributed
   evaluation over data works with accel-core alone), a model raises the error naming
   the package to install.

The backend is built with a :class:`~accel.backends.context.BackendContext` (made by
:meth:`Connector.context`; never the Accelerator) and set up. What it changes it
declares and :meth:`Connector.connect` applies: ``Backend.setup`` may return a
replacement precision (DeepSpeed and XLA run their own mixed precision), and
``Backend.gradient_accumulation_steps`` answers the accumulation steps to train with.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NoReturn

import torch

from accel.backends.base import Backend
from accel.backends.context import BackendContext
from accel.config.core_options import PROCESS_SECTION
from accel.errors import MissingPluginError
from accel.plugins import registry

if TYPE_CHECKING:
    from accel.kwargs import DataLoaderConfiguration, KwargsHandler
    from accel.precision.base import Precision
    from accel.prepared import PreparedObjects
    from accel.state import AcceleratorState, GradientState


class MissingBackend(Backend):
    """Stands in for a multi-process backend that is not installed: data work runs, models raise."""

    def __init__(self, context: BackendContext, error: MissingPluginError):
        super().__init__(context)
        self.error = error

    def prepare_model(self, *args: object, **kwargs: object) -> NoReturn:
        """Raise the error naming the backend package to install."""
        raise self.error

    def prepare(self, objects: list[object], device_placement: list[bool]) -> list[object]:
        """Prepare the objects with the base backend, unless one of them is a model."""
        if any(isinstance(o, torch.nn.Module) for o in objects):
            raise self.error
        return super().prepare(objects, device_placement)


class Connector:
    """Resolves the precision and backend of one Accelerator (see the module docstring for the order)."""

    def __init__(self, state: AcceleratorState, handlers: dict[str, KwargsHandler] | None = None):
        self.state = state
        self.handlers = handlers or {}

    def select_precision(self) -> Precision:
        """The precision instance for the state's ``mixed_precision``."""
        name = self.state.mixed_precision
        return registry.get_precision(name)(name, self.state.device, self.handlers)

    def context(
        self,
        gradient_state: GradientState,
        dataloader_config: DataLoaderConfiguration,
        prepared: PreparedObjects,
        rng_types: list[str] | None = None,
        step_scheduler_with_optimizer: bool = True,
    ) -> BackendContext:
        """The :class:`~accel.backends.context.BackendContext` of these components (no precision yet)."""
        return BackendContext(
            self.state,
            gradient_state,
            dataloader_config,
            self.handlers,
            prepared,
            rng_types=rng_types,
            step_scheduler_with_optimizer=step_scheduler_with_optimizer,
        )

    def select_backend(self, context: BackendContext) -> Backend:
        """The backend instance for ``context`` (not set up yet)."""
        name = PROCESS_SECTION["backend"].from_env()
        if name:
            cls = registry.backends_by_name().get(name)
            if cls is not None:
                return cls(context)
            raise MissingPluginError(
                f"ACCEL_BACKEND={name}", f"the plugin providing backend {name!r}"
            )
        distributed_type = self.state.distributed_type
        try:
            return registry.get_backend(distributed_type)(context)
        except MissingPluginError as error:
            if not str(distributed_type).startswith("MULTI_"):
                raise
            others = " (or another data-parallel plugin: accel-fsdp, accel-deepspeed)"
            return MissingBackend(context, MissingPluginError(error.feature, error.package, others))

    def connect(self, context: BackendContext) -> tuple[Precision, Backend]:
        """Select the precision, then the backend, set the backend up and apply what it declares.

        ``context.precision`` (the precision's one home, which binds the precision to the
        context) is set before the backend is built (a backend reads it); a
        precision returned by ``Backend.setup`` replaces it, and the answer of
        ``Backend.gradient_accumulation_steps`` becomes the gradient state's steps. Returns
        the precision after set-up and the backend.
        """
        context.precision = self.select_precision()
        backend = self.select_backend(context)
        replacement = backend.setup()
        if replacement is not None:
            context.precision = replacement
        requested = context.gradient_accumulation_steps
        steps = backend.gradient_accumulation_steps(requested)
        if steps != requested:
            context.gradient_state.plugin_kwargs["num_steps"] = steps
        return context.precision, backend
