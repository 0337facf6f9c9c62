"""The FP8 recipe kwargs handlers (Accelerate's names). Torch-free.

Pass one of them in ``Accelerator(mixed_precision="fp8", kwargs_handlers=[...])`` to choose
the backend and its settings. A field left unset takes the value of the ``fp8_config``
section ``accel launch`` passed to the process (config file or ``--fp8_*`` flags), else
the default shown.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, cast

from accel.kwargs import KwargsHandler

from . import config as C

if TYPE_CHECKING:
    from collections.abc import Callable

    from torchao.float8 import Float8LinearConfig

    from .ao import ModuleFilter

_TE_DEFAULTS: dict[str, object] = {
    "use_autocast_during_eval": False,
    "margin": 0,
    "interval": 1,
    "fp8_format": "HYBRID",
    "amax_history_len": 1024,
    "amax_compute_algo": "most_recent",
    "override_linear_precision": (False, False, False),
}


def _fill(handler: KwargsHandler, names: list[str], defaults: Mapping[str, object]) -> None:
    """Set each unset field from the launched ``fp8_config`` section, else its default; parse it."""
    section = C.launched_section()
    for name in names:
        value = getattr(handler, name)
        if value is None:
            value = section.get(name, defaults.get(name))
        if value is not None:
            value = C.FP8_SECTION[name].convert(value, name)
        setattr(handler, name, value)


@dataclass
class TERecipeKwargs(KwargsHandler):
    """TransformerEngine's FP8 recipe (``DelayedScaling``) and when it applies.

    ``fp8_format``: ``HYBRID`` (E4M3 forward, E5M2 backward; default) or ``E4M3``;
    ``margin`` (0), ``amax_history_len`` (1024), ``amax_compute_algo`` (``most_recent`` or
    ``max``), ``override_linear_precision`` ((fprop, dgrad, wgrad) GEMMs in higher precision;
    TransformerEngine 1.x only), ``interval`` (kept for config compatibility: TransformerEngine
    ignores it), ``use_autocast_during_eval`` (False: ``model.eval()`` runs without FP8).
    """

    use_autocast_during_eval: bool | None = None
    margin: int | None = None
    interval: int | None = None
    fp8_format: str | None = None
    amax_history_len: int | None = None
    amax_compute_algo: str | Callable | None = None
    override_linear_precision: tuple[bool, bool, bool] | None = None

    backend = "TE"

    def __post_init__(self) -> None:
        _fill(self, [f.name for f in fields(TERecipeKwargs)], _TE_DEFAULTS)


@dataclass
class MSAMPRecipeKwargs(KwargsHandler):
    """MS-AMP's optimisation level: ``O1`` (FP8 weight gradients and all-reduce) or ``O2``
    (default: also the first optimizer moment in FP8, the second in FP16; Adam/AdamW only)."""

    opt_level: str | None = None

    backend = "MSAMP"

    def __post_init__(self) -> None:
        _fill(self, ["opt_level"], {"opt_level": "O2"})


@dataclass
class AORecipeKwargs(KwargsHandler):
    """torchao float8 training.

    ``config``: a ``torchao.float8.Float8LinearConfig`` (default: built from ``pad_inner_dim``,
    default True, and ``enable_fsdp_float8_all_gather``, default True with FSDP2 and False
    otherwise); ``module_filter_func(module, fqn) -> bool`` chooses the layers to convert
    (default: every ``nn.Linear`` but the first and the last, whose sizes are multiples of 16).
    """

    config: Float8LinearConfig | None = None
    module_filter_func: ModuleFilter | None = None
    pad_inner_dim: bool | None = None
    enable_fsdp_float8_all_gather: bool | None = None

    backend = "AO"

    def __post_init__(self) -> None:
        _fill(self, ["pad_inner_dim", "enable_fsdp_float8_all_gather"], {"pad_inner_dim": True})


_SPECIFIC: dict[str, type[TERecipeKwargs | MSAMPRecipeKwargs | AORecipeKwargs]] = {
    "TE": TERecipeKwargs,
    "MSAMP": MSAMPRecipeKwargs,
    "AO": AORecipeKwargs,
}
"""The recipe handler of each backend."""


@dataclass
class FP8RecipeKwargs(TERecipeKwargs, MSAMPRecipeKwargs, AORecipeKwargs):
    """Any backend's recipe in one object: ``backend`` (``te``, ``msamp`` or ``ao``, any case;
    unset: the configured one, else the first installed of MS-AMP, TransformerEngine, torchao)
    plus that backend's fields. ``optimization_level`` is accepted as another name of
    ``opt_level``: ``FP8RecipeKwargs(backend="msamp", optimization_level="O2")``.
    """

    backend: str | None = None  # type: ignore[assignment]
    optimization_level: str | None = None

    def __post_init__(self) -> None:
        if self.optimization_level is not None:
            if self.opt_level is not None and C.opt_level(self.optimization_level) != C.opt_level(
                self.opt_level
            ):
                raise C.ConfigError(
                    "FP8RecipeKwargs: opt_level and optimization_level disagree; pass one of them"
                )
            self.opt_level = self.optimization_level
        if self.backend is None:
            self.backend = C.launched_backend()
        if self.backend is not None:
            self.backend = C.backend_name(self.backend)
        TERecipeKwargs.__post_init__(self)
        MSAMPRecipeKwargs.__post_init__(self)
        AORecipeKwargs.__post_init__(self)
        self.optimization_level = self.opt_level

    def for_backend(self, backend: str) -> KwargsHandler:
        """The backend-specific handler holding this object's settings for ``backend``."""
        cls = _SPECIFIC[C.backend_name(backend)]
        return cls(**{f.name: getattr(self, f.name) for f in fields(cls)})


def recipe_for(backend: str, handlers: Mapping[str, object]) -> KwargsHandler:
    """The recipe of ``backend`` among the Accelerator's ``handlers`` (by class name), else its default."""
    backend = C.backend_name(backend)
    cls = _SPECIFIC[backend]
    if cls.__name__ in handlers:  # the handlers are kept by their class's name
        return cast("KwargsHandler", handlers[cls.__name__])
    generic = cast("FP8RecipeKwargs | None", handlers.get("FP8RecipeKwargs"))
    if generic is not None:
        return generic.for_backend(backend)
    return cls()
