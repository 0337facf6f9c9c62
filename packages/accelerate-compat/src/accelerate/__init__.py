"""The ``accelerate`` import name, backed by accel.

transformers, PEFT, TRL and diffusers import ``accelerate``; with this distribution
installed they run on accel. Every submodule ``accelerate.X`` *is* the module ``accel.X``
(the same object, so a library that monkeypatches ``accelerate.big_modeling`` patches
accel), except ``accelerate.commands``, which this package provides over accel's CLI.
Top-level names (``accelerate.PartialState``, ...) are accel's, except
``accelerate.Accelerator``: a subclass of accel's with Accelerate's rules where accel's
differ (:mod:`accelerate.compat_accelerator`). ``__version__`` is the
distribution's: the Accelerate API it mirrors plus accel's version as one number
(``1.15.0.100`` for accel 0.1.0, see :func:`compat_version`).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from collections.abc import Sequence
from typing import TYPE_CHECKING

from accel.lazy import exports

#: The Accelerate release whose API this distribution mirrors.
MIRRORED_API = "1.15.0"

#: Submodules this package implements itself; every other ``accelerate.X`` is ``accel.X``.
OWN_SUBPACKAGES = ("commands", "compat_accelerator")


#: What ``importlib`` writes on a module it loads (``_init_module_attrs``), even one a loader's
#: ``create_module`` returned: ``__spec__`` always, the others where they are missing.
_IMPORT_ATTRIBUTES = (
    "__spec__",
    "__name__",
    "__loader__",
    "__package__",
    "__path__",
    "__file__",
    "__cached__",
)


class _AliasLoader(importlib.abc.Loader):
    """Loads ``accelerate.X`` by importing ``accel.X`` and returning that very module.

    The import system gives the module the alias's spec between :meth:`create_module` and
    :meth:`exec_module`; :meth:`exec_module` puts accel's attributes back, so ``accel.X``
    keeps its ``__spec__``, ``__name__``, loader and resources, and ``importlib.reload``
    (under either name) reloads it through accel's own loader.
    """

    def __init__(self, target: str) -> None:
        self.target = target
        self._attributes: dict[str, object] = {}

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = importlib.import_module(self.target)
        self._attributes = {
            name: vars(module)[name] for name in _IMPORT_ATTRIBUTES if name in vars(module)
        }
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        """Restore what the import system changed: accel already ran the module."""
        for name in _IMPORT_ATTRIBUTES:
            if name in self._attributes:
                setattr(module, name, self._attributes[name])
            elif name in vars(module):
                delattr(module, name)


class _AliasFinder(importlib.abc.MetaPathFinder):
    """Resolves ``accelerate.X`` to ``accel.X`` before the path finders see the name.

    It must come first: an aliased package's ``__path__`` is accel's folder, where the
    path finder would load a second copy of ``accel.X.Y`` under the name ``accelerate.X.Y``.
    """

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: types.ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith("accelerate."):
            return None
        rest = fullname[len("accelerate.") :]
        if rest.split(".", 1)[0] in OWN_SUBPACKAGES:
            return None  # the regular path finder loads this package's own files
        accel_name = f"accel.{rest}"
        try:
            found = importlib.util.find_spec(accel_name)
        except ModuleNotFoundError as error:
            # accel has no such module (or a parent is not a package): not found. Any other
            # missing module (a dependency, accel itself) is its own error, under its name.
            missing = error.name or ""
            if missing.startswith("accel.") and (
                accel_name == missing or accel_name.startswith(f"{missing}.")
            ):
                return None
            raise
        if found is None:
            return None
        return importlib.machinery.ModuleSpec(
            fullname,
            _AliasLoader(accel_name),
            is_package=found.submodule_search_locations is not None,
        )


def _install_finder() -> None:
    if not any(isinstance(finder, _AliasFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, _AliasFinder())


_install_finder()

#: Where accel's log records go under this distribution: Accelerate's logger of the module
#: that does the same thing (longest prefix first); any other ``accel.X`` goes to
#: ``accelerate.X``, so ``logging.getLogger("accelerate")`` governs every one of them.
LOGGER_NAMES = {
    "accel.env_helpers": "accelerate.utils.environment",
    "accel.accelerator_checkpointing": "accelerate.checkpointing",
    "accel.checkpoint": "accelerate.checkpointing",
    "accel.data": "accelerate.data_loader",
    "accel.memory": "accelerate.utils.memory",
    "accel.big_model.device_map": "accelerate.utils.modeling",
    "accel.big_model.dispatch": "accelerate.big_modeling",
    "accel.big_model.hooks": "accelerate.hooks",
    "accel_cli": "accelerate.commands",
    "accel_deepspeed": "accelerate.utils.deepspeed",
    "accel_fsdp": "accelerate.utils.fsdp_utils",
    "accel_megatron": "accelerate.utils.megatron_lm",
    "accel_trackers": "accelerate.tracking",
    "accel.trackers": "accelerate.tracking",
}


def accelerate_logger_name(name: str) -> str:
    """The Accelerate logger name the records of accel's logger ``name`` go to (other names kept)."""
    for prefix in sorted(LOGGER_NAMES, key=len, reverse=True):
        if name == prefix or name.startswith(f"{prefix}."):
            return LOGGER_NAMES[prefix]
    if name == "accel" or name.startswith("accel."):
        return "accelerate" + name[len("accel") :]
    return name


def _route_loggers() -> None:
    from accel.logging import route_logger_names

    route_logger_names(accelerate_logger_name)


_route_loggers()


def compat_version(accel_version: str) -> str:
    """This distribution's version for accel ``accel_version``: ``0.1.0`` -> ``1.15.0.100``.

    The mirrored API, then MAJOR*10000 + MINOR*100 + PATCH of accel's release: all-numeric
    (no local label, which indexes refuse), increasing with accel's version, below 1.15.1.
    """
    major, minor, patch = (int(part) for part in accel_version.split(".")[:3])
    if not (minor < 100 and patch < 100):
        raise ValueError(f"accel {accel_version}: minor and patch must stay below 100")
    return f"{MIRRORED_API}.{major * 10000 + minor * 100 + patch}"


def _distribution_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("accelerate")
    except PackageNotFoundError:  # run from a source tree without installing
        from accel.imports import installed_version

        return compat_version(installed_version("accel-core"))


def _from_accel(name: str) -> object:
    """Every other public name is accel's own object."""
    import accel

    return getattr(accel, name)


def _accel_names() -> list[str]:
    import accel

    return dir(accel)


if TYPE_CHECKING:  # what type checkers and editors follow
    from accelerate.compat_accelerator import Accelerator as Accelerator

    __version__: str

_NAMES = {"Accelerator": "accelerate.compat_accelerator"}
"""Names this package defines itself: ``Accelerator`` keeps Accelerate's rules where accel's
differ."""

__getattr__, __dir__ = exports(
    __name__,
    _NAMES,
    computed={"__version__": _distribution_version},
    fallback=_from_accel,
    fallback_names=_accel_names,
)
