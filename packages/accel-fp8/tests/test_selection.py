"""Backend selection over every combination of available libraries (availability simulated;
the rules are the real code), and availability checks on broken installs."""

from __future__ import annotations

import itertools
import sys

import pytest
from accel.errors import ConfigError
from accel_fp8 import (
    AORecipeKwargs,
    FP8BackendError,
    FP8RecipeKwargs,
    MSAMPRecipeKwargs,
    TERecipeKwargs,
)
from accel_fp8.availability import unavailable_reason
from accel_fp8.selection import select_backend

BACKENDS = ("MSAMP", "TE", "AO")
COMBINATIONS = [
    frozenset(c) for r in range(4) for c in itertools.combinations(BACKENDS, r)
]  # all 8


def _only(available: frozenset) -> object:
    return lambda backend: None if backend in available else "is not installed"


def _handlers(*objects: object) -> dict:
    return {type(o).__name__: o for o in objects}


@pytest.mark.parametrize("available", COMBINATIONS, ids=lambda c: "+".join(sorted(c)) or "none")
def test_automatic_choice_prefers_msamp_then_te_then_ao(available):
    expected = next((b for b in BACKENDS if b in available), None)
    if expected is None:
        with pytest.raises(FP8BackendError) as error:
            select_backend({}, None, _only(available))
        message = str(error.value)
        assert "accel-fp8[ao]" in message and "accel-fp8[te]" in message
        assert "github.com/Azure/MS-AMP" in message
    else:
        assert select_backend({}, None, _only(available)) == expected


@pytest.mark.parametrize("available", COMBINATIONS, ids=lambda c: "+".join(sorted(c)) or "none")
@pytest.mark.parametrize(
    ("handler", "backend"),
    [
        (TERecipeKwargs(), "TE"),
        (MSAMPRecipeKwargs(), "MSAMP"),
        (AORecipeKwargs(), "AO"),
        (FP8RecipeKwargs(backend="te"), "TE"),
        (FP8RecipeKwargs(backend="MSAMP", optimization_level="O1"), "MSAMP"),
        (FP8RecipeKwargs(backend="ao"), "AO"),
    ],
    ids=lambda v: v if isinstance(v, str) else type(v).__name__,
)
def test_an_explicit_recipe_handler_wins(available, handler, backend):
    handlers = _handlers(handler)
    if backend in available:
        # the handler wins over the configured backend and over the automatic order
        assert select_backend(handlers, "msamp", _only(available)) == backend
    else:
        with pytest.raises(FP8BackendError, match=type(handler).__name__) as error:
            select_backend(handlers, None, _only(available))
        assert "is not installed" in str(error.value)
        assert {"TE": "accel-fp8[te]", "AO": "accel-fp8[ao]", "MSAMP": "MS-AMP"}[backend] in str(
            error.value
        )


@pytest.mark.parametrize("available", COMBINATIONS, ids=lambda c: "+".join(sorted(c)) or "none")
@pytest.mark.parametrize("configured", ["te", "TE", "msamp", "MSAMP", "ao"])
def test_the_configured_backend_beats_the_automatic_order(available, configured):
    backend = configured.upper()
    if backend in available:
        assert select_backend({}, configured, _only(available)) == backend
        # FP8RecipeKwargs without a backend leaves the choice to the configuration
        generic = FP8RecipeKwargs()
        assert generic.backend is None
        assert select_backend(_handlers(generic), configured, _only(available)) == backend
    else:
        with pytest.raises(FP8BackendError, match=f"fp8_config.backend={configured}"):
            select_backend({}, configured, _only(available))


def test_conflicting_handlers_and_bad_backend_names():
    handlers = _handlers(TERecipeKwargs(), AORecipeKwargs())
    with pytest.raises(ValueError, match="pass only one FP8 recipe handler"):
        select_backend(handlers, None, _only(frozenset(BACKENDS)))
    with pytest.raises(ConfigError, match="te .TransformerEngine., msamp .MS-AMP. or ao"):
        select_backend({}, "apex", _only(frozenset(BACKENDS)))
    with pytest.raises(ConfigError, match="not an FP8 backend"):
        FP8RecipeKwargs(backend="fp4")


@pytest.mark.parametrize(
    "error",
    ["RuntimeError('Found empty transformer-engine meta package')", "OSError('libnccl.so.2')"],
)
def test_a_broken_transformer_engine_counts_as_unavailable(tmp_path, monkeypatch, error):
    package = tmp_path / "transformer_engine"
    package.mkdir()
    (package / "__init__.py").write_text(f"raise {error}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [n for n in sys.modules if n.startswith("transformer_engine")]:
        monkeypatch.delitem(sys.modules, name)
    reason = unavailable_reason("TE")
    assert reason is not None and "fails to import" in reason
    assert error.split("(")[0] in reason
    with pytest.raises(FP8BackendError, match="TransformerEngine fails to import"):
        select_backend(_handlers(TERecipeKwargs()))


def test_missing_libraries_are_reported_as_not_installed(monkeypatch):
    monkeypatch.setitem(sys.modules, "msamp", None)  # import msamp -> ModuleNotFoundError
    assert unavailable_reason("MSAMP") is not None
