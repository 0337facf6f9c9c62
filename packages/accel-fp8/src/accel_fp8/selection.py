"""Which FP8 backend ``mixed_precision="fp8"`` uses. Torch-free.

1. A backend-specific recipe handler (``TERecipeKwargs``, ``MSAMPRecipeKwargs``,
   ``AORecipeKwargs``) or ``FP8RecipeKwargs(backend=...)`` passed to the Accelerator wins.
2. Else the ``backend`` of the ``fp8_config`` section ``accel launch`` passed on.
3. Else the first available of MS-AMP, TransformerEngine, torchao.

A backend asked for (1 or 2) that is not available is an error naming what to install;
so is finding none in 3.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from . import config as C
from .availability import INSTALL, LIBRARIES, FP8BackendError, unavailable_reason

_HANDLER_BACKENDS = {"TERecipeKwargs": "TE", "MSAMPRecipeKwargs": "MSAMP", "AORecipeKwargs": "AO"}


def requested_backend(
    handlers: Mapping[str, object], configured: str | None = None
) -> tuple[str, str] | None:
    """``(backend, who asked)`` from the handlers, else from the configured section; None if neither."""
    asked = [(b, name) for name, b in _HANDLER_BACKENDS.items() if name in handlers]
    generic = handlers.get("FP8RecipeKwargs")
    generic_backend = getattr(generic, "backend", None) if generic is not None else None
    if generic_backend:
        asked.append(
            (C.backend_name(generic_backend), f"FP8RecipeKwargs(backend={generic_backend!r})")
        )
    if len({b for b, _ in asked}) > 1:
        names = " and ".join(who for _, who in asked)
        raise ValueError(
            f"{names} ask for different FP8 backends: pass only one FP8 recipe handler"
        )
    if asked:
        return asked[0]
    if configured:
        return C.backend_name(configured, "fp8_config.backend"), f"fp8_config.backend={configured}"
    return None


def select_backend(
    handlers: Mapping[str, object],
    configured: str | None = None,
    unavailable: Callable[[str], str | None] = unavailable_reason,
) -> str:
    """The backend to use: ``TE``, ``MSAMP`` or ``AO``.

    ``unavailable(backend)`` returns None when the backend's library can be used, else why not.
    """
    asked = requested_backend(handlers, configured)
    if asked is not None:
        backend, who = asked
        reason = unavailable(backend)
        if reason is not None:
            raise FP8BackendError(
                f"{who} asks for the {LIBRARIES[backend]} FP8 backend, but {LIBRARIES[backend]} "
                f"{reason}: {INSTALL[backend]}"
            )
        return backend
    reasons = {}
    for backend in C.BACKENDS:
        reasons[backend] = unavailable(backend)
        if reasons[backend] is None:
            return backend
    found = "; ".join(f"{LIBRARIES[b]} {reasons[b]}" for b in C.BACKENDS)
    raise FP8BackendError(
        f"mixed_precision='fp8' needs an FP8 library and none is usable ({found}). "
        f"Install one: torchao ({INSTALL['AO']}), TransformerEngine ({INSTALL['TE']}) or "
        f"MS-AMP ({INSTALL['MSAMP']})"
    )
