"""Declarative config sections: a plugin declares its section's keys once.

A plugin that owns a section of the config file (``fsdp_config``, ``mpirun_config``, ...)
describes each key with an :class:`Option` and groups them in a :class:`Section`. From that
one declaration come:

- validation of the section in a config file (:meth:`Section.validate`; a ``Section`` is
  itself the validator ``accel_config_sections`` returns): unknown keys with a did-you-mean,
  wrong types, values outside the choices, then the section's cross-key ``checks``;
- the ``accel launch`` flags (:meth:`Section.add_arguments`, called from the plugin's
  ``accel_launch_arguments`` hook): one ``--<flag>`` per key, checked as it is parsed, whose
  text goes into ``<section>.<key>`` only when given (a flag not given never overrides the
  config file);
- the simple ``accel config`` questions (:meth:`Section.ask`: select, confirm, integer,
  number or text, by the key's type);
- the worker-side reader (:meth:`Section.read`): the typed values of the section that
  ``accel launch`` passed to the process in ``ACCEL_LAUNCH_CONFIG``, defaults filled in.

Example::

    from accel.config.options import Option, Section

    MY_SECTION = Section(
        "my_config",
        [
            Option("my_mode", choices=("fast", "safe"), default="safe", help="how to run"),
            Option("my_workers", int, default=1, minimum=1, help="worker threads"),
        ],
        title="My plugin",
    )

    @hookimpl
    def accel_config_sections():
        return {MY_SECTION.key: MY_SECTION}

    @hookimpl
    def accel_launch_arguments(parser):
        MY_SECTION.add_arguments(parser)      # --my_mode, --my_workers

    # in a worker: MY_SECTION.read() == {"my_mode": "safe", "my_workers": 1}

Errors read ``<label>=<value> <problem>: <what is allowed>``, where the label is the
section-qualified key (``my_config.my_workers``), the flag (``--my_workers``) or the name a
plugin passes (a dataclass field). Torch-free and yaml-free.
"""

from __future__ import annotations

import argparse
import builtins
import copy
import difflib
import json
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from accel import catalog, env_vars
from accel.env_vars import accelerate_name
from accel.errors import ConfigError

_T = TypeVar("_T")
_Parser = argparse.ArgumentParser | argparse._ArgumentGroup
"""Where flags are added: an argparse parser or one of its groups."""

_KINDS: dict[type, str] = {str: "str", int: "int", float: "float", bool: "bool", list: "list"}
_TYPES = (
    "str",
    "int",
    "float",
    "bool",
    "list",
    "any",
    "port",
    "gpu_ids",
    "yesno",
    "host",
    "section",
)
"""Every ``Option.type``; each converts in :meth:`Option.convert` (``_<type>``)."""
_METAVARS = {
    "int": "N",
    "float": "NUMBER",
    "bool": "{true,false}",
    "port": "PORT",
    "gpu_ids": "IDS",
    "host": "HOST",
}
_MISSING: Final = object()
_TRUE = {"true", "yes", "1", "on", "y", "t"}
_FALSE = {"false", "no", "0", "off", "n", "f"}


def parse_bool(key: str, value: object) -> bool:
    """A boolean setting from a bool or ``true``/``false``/``yes``/``no``/``on``/``off``/``1``/``0``
    (``y``/``n``/``t``/``f`` too, as Accelerate's ``str_to_bool`` accepts).

    accel's one yes/no table: config files, flags and environment variables alike. Anything
    else (the empty string included) raises :class:`~accel.errors.ConfigError` naming ``key``;
    plugins use it for the boolean keys of their config sections.
    """
    if isinstance(value, bool):
        return value
    if not isinstance(value, (str, int)):
        raise ConfigError(f"{key}={value!r} is not a boolean: use true or false")
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ConfigError(f"{key}={value!r} is not a boolean: use true or false")


def _article(title: str) -> str:
    """``an`` before a vowel sound (``an FSDP``, ``an MPI``), ``a`` otherwise."""
    if not title:
        return "a"
    first = title[0]
    acronym = len(title) > 1 and title[:2].isupper()
    sounds = "AEFHILMNORSX" if acronym else "AEIOUaeiou"
    return "an" if first in sounds else "a"


@dataclass(frozen=True)
class Option:
    """One key of a config section (a plugin's or core's): its type, default, allowed values and help.

    ``type`` is ``str``, ``int``, ``float``, ``bool``, ``list`` (a list of names, or one
    comma-separated string), ``"any"``, or one of ``"port"`` (1-65535), ``"gpu_ids"``
    (``all`` or ``0,1``), ``"yesno"`` (a boolean written ``yes``/``no``), ``"host"`` (a host
    name or address) and ``"section"`` (a mapping); ``choices`` makes the key a choice among
    them (strings match in any case and come back as declared; ints are compared as numbers;
    YAML's bare ``no`` selects a ``no`` choice).
    ``reader(value, label)`` replaces the built-in conversion for keys with their own rules
    (it returns the value or raises :class:`~accel.errors.ConfigError` naming ``label``);
    ``type`` then still chooses the kind of question. ``None`` means "not set" (an error
    for a key that is not ``nullable``).

    :meth:`convert` is the one conversion of every setting, core's and the plugins', from a
    config file, an environment variable or a flag alike.
    """

    name: str
    """The key in the section (``fsdp_sharding_strategy``)."""
    type: builtins.type | str = str
    """``str``, ``int``, ``float``, ``bool``, ``list`` or ``"any"``."""
    default: Any = None
    """The value :meth:`Section.read` gives when the key is not set."""
    choices: tuple[object, ...] = ()
    """Allowed values (empty: any value of ``type``)."""
    help: str = ""
    """What the key does: flag help, and the question when ``question`` is empty."""
    minimum: float | None = None
    """Smallest allowed number (``int`` / ``float``)."""
    aliases: tuple[str, ...] = ()
    """Other spellings of the key accepted in a file (read as ``name``)."""
    extra: tuple[str, ...] = ()
    """Literal strings accepted besides ``type``, kept as written (``("auto",)``)."""
    numbered: bool = False
    """A choice may also be given as its 1-based position (FSDP's sharding strategies 1-5)."""
    reader: Callable[[Any, str], object] | None = None
    """Custom conversion ``reader(value, label) -> value``; raises ConfigError naming ``label``."""
    allowed: str = ""
    """What is allowed, in words (default: derived from the type, choices and minimum)."""
    flag: str | None = ""
    """The ``accel launch`` flag without dashes: ``""`` derives it (the section's
    ``flag_prefix`` + name), ``None`` gives the key no flag."""
    flag_aliases: tuple[str, ...] = ()
    """Further flag spellings for the same key: without dashes (``nnodes``), or written out
    when they start with a dash (``-q``)."""
    metavar: str = ""
    """Placeholder of the flag's value in ``accel launch --help`` (default: ``{a,b}`` for
    choices, ``N`` for an int, ``VALUE`` otherwise)."""
    group: str = ""
    """Heading of the flag in ``accel launch --help`` (default: the section's group)."""
    store_true: bool = False
    """The flag takes no value and sets ``True``."""
    off_flag: str = ""
    """With :attr:`store_true`: a second flag (without dashes) that sets ``False``."""
    repeatable: bool = False
    """The flag may be given several times; its values are collected in a list."""
    plugin: str = ""
    """For core's keys: the package whose plugin adds the key's flag (``accel-tpu`` for
    ``--tpu_name``); core adds the flags of keys without one."""
    question: str = ""
    """The ``accel config`` question (default: ``help``)."""
    value_aliases: Mapping[str, str] = field(default_factory=dict, hash=False)
    """Other spellings of a choice, read as the declared one (``{"TPU": "XLA"}``)."""
    env: str | None = None
    """Environment variable of the environment layer (core's keys: ``ACCEL_NUM_PROCESSES``)."""
    in_file: bool = True
    """Whether the key may appear in a config file (launch-only settings may not)."""
    nullable: bool = True
    """Whether the key may be empty (None) in a config file."""
    standard: bool = False
    """Every config file ``accel config`` writes holds the key (:data:`~accel.config.files.STANDARD_KEYS`)."""

    def __post_init__(self) -> None:
        kind = _KINDS.get(self.type, self.type)
        if kind not in _TYPES:
            raise TypeError(f"Option {self.name!r}: unsupported type {self.type!r}")
        object.__setattr__(self, "type", kind)
        object.__setattr__(self, "choices", tuple(self.choices))
        object.__setattr__(self, "aliases", tuple(self.aliases))
        object.__setattr__(self, "extra", tuple(self.extra))
        object.__setattr__(self, "flag_aliases", tuple(self.flag_aliases))
        object.__setattr__(self, "value_aliases", dict(self.value_aliases))

    @property
    def type_name(self) -> str:
        """:attr:`type` by name (``int``, ``gpu_ids``, ...): how ``__post_init__`` stores it."""
        return self.type if isinstance(self.type, str) else _KINDS[self.type]

    @property
    def kind(self) -> str:
        """``choice`` for a key with choices, else its type (``int``, ``bool``, ``gpu_ids``, ...)."""
        return "choice" if self.choices else self.type_name

    @property
    def shown_metavar(self) -> str:
        """The flag's placeholder: :attr:`metavar`, else ``{a,b,c}`` from the choices (plus
        :attr:`extra`), ``{no,yes}``, ``N``, ``PORT``, ... from the type, else ``VALUE``."""
        if self.metavar:
            return self.metavar
        if self.choices:
            return "{" + ",".join(str(c) for c in (*self.choices, *self.extra)) + "}"
        if self.type == "yesno":
            return "{no,yes}"
        return _METAVARS.get(self.type_name, "VALUE")

    # -- describing ---------------------------------------------------------------
    def describe(self) -> str:
        """What the key accepts, in words (``FULL_SHARD, SHARD_GRAD_OP or NO_SHARD``)."""
        if self.allowed:
            return self.allowed
        if self.choices:
            names = [str(c) for c in self.choices]
            text = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]
            if self.numbered:
                text += f" (or 1-{len(names)})"
        else:
            bound = f" >= {self._bound()}" if self.minimum is not None else ""
            text = {
                "int": f"a whole number{bound}",
                "float": f"a number{bound}",
                "bool": "true or false",
                "str": "a string",
                "list": "a list of names (or one comma-separated string)",
                "any": "any value",
                "port": "a port number from 1 to 65535",
                "gpu_ids": "all or comma-separated GPU ids such as 0,1",
                "yesno": "yes or no",
                "host": "a host name or IP address",
                "section": "a mapping of settings (or {})",
            }[self.type_name]
        if self.extra:
            text += " (or " + ", ".join(self.extra) + ")"
        return text

    def _bound(self) -> float | None:
        minimum = self.minimum
        if minimum is not None and float(minimum).is_integer():
            return int(minimum)
        return minimum

    # -- the environment ------------------------------------------------------------
    @property
    def env_names(self) -> tuple[str, ...]:
        """The variables this setting is read from, in order: :attr:`env`, then Accelerate's
        spelling of an ``ACCEL_*`` name (``ACCEL_X`` -> ``ACCELERATE_X``); empty without ``env``."""
        if not self.env:
            return ()
        alias = accelerate_name(self.env)
        return (self.env,) if alias is None else (self.env, alias)

    def from_env(self, environ: Mapping[str, str] | None = None, default: object = _MISSING) -> Any:
        """This setting's value from its environment variable, converted by :meth:`convert`.

        The first of :attr:`env_names` that is set in ``environ`` (default ``os.environ``) is
        read: accel's spelling wins over Accelerate's. When neither is set: ``default``, else
        the declared :attr:`default`. A variable set to the empty string is set: its text ``""``
        is converted like any other (a list reads as no names, a string as empty; a number, a
        boolean or a choice is refused), the same as an empty value in a file or a flag. Errors
        read ``environment variable ACCEL_X (name)='value' ...``. This is the only reader of
        the variables accel declares (``integration-tests/structure/test_environment_reads.py``).
        """
        environ = os.environ if environ is None else environ
        for name in self.env_names:
            raw = environ.get(name)
            if raw is not None:
                return self.convert(raw, f"environment variable {name} ({self.name})")
        return _copy(self.default) if default is _MISSING else default

    # -- converting ---------------------------------------------------------------
    def convert(self, value: object, label: str | None = None) -> Any:
        """``value`` in this key's type (None stays None); ConfigError naming ``label`` otherwise.

        Strings (from flags and the environment) are parsed; YAML's own types are accepted.
        """
        label = label or self.name
        if value is None:
            if self.nullable:
                return None
            raise ConfigError(f"{label} must not be empty: use {self.describe()}")
        if self.extra and isinstance(value, str):
            for literal in self.extra:
                if value.strip().lower() == literal.lower():
                    return literal
        if self.reader is not None:
            return self.reader(value, label)
        if self.choices:
            return self._choice(value, label)
        return getattr(self, "_" + self.type_name)(value, label)

    def _bad(
        self, value: object, label: str, problem: str = "is not allowed", hint: str = ""
    ) -> ConfigError:
        return ConfigError(f"{label}={value!r} {problem}{hint}: use {self.describe()}")

    def _choice(self, value: object, label: str) -> object:
        if not isinstance(value, str) and hasattr(value, "name"):  # an enum member
            value = value.name
        if value is False:  # YAML reads a bare `no` as false
            value = next((c for c in self.choices if str(c).lower() == "no"), value)
        if all(isinstance(c, int) and not isinstance(c, bool) for c in self.choices):
            number = self._int(value, label, check_minimum=False)
            if number not in self.choices:
                raise self._bad(value, label)
            return number
        text = str(value).strip()
        for choice in self.choices:
            if text.lower() == str(choice).lower():
                return choice
        for alias, choice in self.value_aliases.items():
            if text.lower() == alias.lower():
                return choice
        if self.numbered and text.isdigit() and 1 <= int(text) <= len(self.choices):
            return self.choices[int(text) - 1]
        close = difflib.get_close_matches(text, [str(c) for c in self.choices], n=1)
        raise self._bad(value, label, hint=f" (did you mean {close[0]}?)" if close else "")

    def _int(self, value: object, label: str, check_minimum: bool = True) -> int:
        number: object = value
        if isinstance(value, float) and value.is_integer():
            number = int(value)
        elif isinstance(value, str):
            try:
                number = int(value.strip())
            except ValueError:
                number = None
        if isinstance(number, bool) or not isinstance(number, int):
            raise self._bad(value, label, "is not an integer")
        if check_minimum and self.minimum is not None and number < self.minimum:
            raise ConfigError(f"{label}={value!r} must be a whole number >= {self._bound()}")
        return number

    def _float(self, value: object, label: str) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise self._bad(value, label, "is not a number")
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise self._bad(value, label, "is not a number") from None
        if self.minimum is not None and number < self.minimum:
            raise ConfigError(f"{label}={value!r} must be >= {self._bound()}")
        return number

    def _bool(self, value: object, label: str) -> bool:
        return parse_bool(label, value)

    def _yesno(self, value: object, label: str) -> str:
        try:
            return "yes" if parse_bool(label, value) else "no"
        except ConfigError:
            raise self._bad(value, label) from None

    def _port(self, value: object, label: str) -> int:
        number = self._int(value, label)
        if not 1 <= number <= 65535:
            raise self._bad(value, label, "is out of range")
        return number

    def _host(self, value: object, label: str) -> str:
        text = self._str(value, label)
        if not text or any(c.isspace() for c in text):
            raise self._bad(value, label, "is not a host name or IP address")
        return text

    def _gpu_ids(self, value: object, label: str) -> str:
        text: object = value
        if isinstance(value, int) and not isinstance(value, bool):
            text = str(value)
        elif isinstance(value, (list, tuple)):
            text = ",".join(str(v) for v in value)
        if not isinstance(text, str):
            raise self._bad(value, label)
        text = text.strip().replace(" ", "")
        if text.lower() == "all":
            return "all"
        ids = text.split(",")
        if not all(i.isdigit() for i in ids):
            raise self._bad(value, label, "is not a list of GPU ids")
        if len(set(ids)) != len(ids):
            raise self._bad(value, label, "names a GPU twice")
        return text

    def _section(self, value: object, label: str) -> dict[object, object]:
        if not isinstance(value, Mapping):
            raise self._bad(value, label, "is not a mapping")
        return dict(value)

    def _str(self, value: object, label: str) -> str:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        if not isinstance(value, str):
            raise self._bad(value, label, "is not a string")
        return value.strip()

    def _list(self, value: object, label: str) -> list[str]:
        if isinstance(value, str):
            return [item.strip() for item in value.split(",") if item.strip()]
        if isinstance(value, (list, tuple)):
            return [str(item).strip() for item in value if str(item).strip()]
        raise self._bad(value, label, "is not a list")

    def _any(self, value: object, label: str) -> object:
        return value


def _no_checks() -> Sequence[Callable[[dict[str, Any]], None]]:
    return ()


@dataclass(frozen=True)
class Section:
    """A plugin's config-file section: its key, its options and how they become flags.

    ``checks`` are cross-key rules: each is called with the section's typed values
    (defaults filled in) once every key is valid, and raises ConfigError to reject them.
    ``distributed_type`` names the type the section belongs to (it is ignored otherwise); for
    accel's own sections it comes from :data:`accel.catalog.SECTION_DISTRIBUTED_TYPE`.
    A Section is callable: ``section(mapping)`` is :meth:`validate`, so it is the validator
    ``accel_config_sections`` returns.
    """

    key: str
    """The section's key in the config file (``fsdp_config``)."""
    options: Sequence[Option]
    """The section's keys (stored as a tuple), in the order of the flags and of ``accel launch --help``."""
    title: str = ""
    """What the section configures, in messages (``FSDP``: "is not an FSDP setting")."""
    distributed_type: str | None = None
    """The distributed type the section belongs to (``FSDP``), or None for any (default: the
    catalog's entry for the section key)."""
    flag_prefix: str = ""
    """Prefix of derived flag names (``fp8_``: key ``margin`` -> ``--fp8_margin``)."""
    checks: Sequence[Callable[[dict[str, Any]], None]] = field(default_factory=_no_checks)
    """Cross-key rules over the typed values; each raises ConfigError."""
    flat_dests: bool = False
    """Flags parse into the bare key names (``dynamo_backend``, as Accelerate's parser names
    them) instead of ``<section>.<key>``."""
    _index: dict[str, Option] = field(init=False, repr=False, compare=False, default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "options", tuple(self.options))
        object.__setattr__(self, "checks", tuple(self.checks))
        object.__setattr__(self, "title", self.title or self.key)
        if self.distributed_type is None:
            owner = catalog.SECTION_DISTRIBUTED_TYPE.get(self.key)
            object.__setattr__(self, "distributed_type", owner)
        index: dict[str, Option] = {}
        for option in self.options:
            for name in (option.name, *option.aliases):
                if name in index:
                    raise ValueError(f"{self.key}: key {name!r} is declared twice")
                index[name] = option
        self._index.update(index)

    def __str__(self) -> str:
        return self.key

    # -- the declaration ----------------------------------------------------------
    def __iter__(self) -> Iterator[Option]:
        return iter(self.options)

    def __contains__(self, name: object) -> bool:
        return name in self._index

    def __getitem__(self, name: str) -> Option:
        """The option of key ``name`` (or of one of its aliases); KeyError if none."""
        return self._index[name]

    def get(self, name: str) -> Option | None:
        """The option of key ``name`` (or of an alias), or None."""
        return self._index.get(name)

    @property
    def names(self) -> list[str]:
        """The declared keys, without aliases."""
        return [option.name for option in self.options]

    def defaults(self) -> dict[str, Any]:
        """Every key with its default."""
        return {option.name: _copy(option.default) for option in self.options}

    # -- validation ---------------------------------------------------------------
    def validate(self, section: object) -> list[str]:
        """Errors in a mapping of this section, one line each (empty when it is valid)."""
        if not isinstance(section, Mapping):
            return [
                f"{self.key} must be a mapping of {self.title} settings, not {type(section).__name__}"
            ]
        errors: list[str] = []
        for name, value in section.items():
            try:
                self._convert(name, value)
            except ConfigError as error:
                errors.append(str(error))
        if errors:
            return errors
        try:
            self._check(self.read(section))
        except ConfigError as error:
            errors.append(f"{self.key}: {error}")
        return errors

    def __call__(self, section: object) -> list[str]:
        """:meth:`validate`: a Section is the validator of ``accel_config_sections``."""
        return self.validate(section)

    def _check(self, values: dict[str, Any]) -> None:
        for check in self.checks:
            check(values)

    def _convert(self, name: object, value: object) -> tuple[str, object]:
        option = self._index.get(name) if isinstance(name, str) else None
        if option is None:
            close = difflib.get_close_matches(str(name), list(self._index), n=1)
            hint = f"did you mean {close[0]}? " if close else ""
            raise ConfigError(
                f"unknown key {name!r}: {self.key}.{name} is not {_article(self.title)} "
                f"{self.title} setting; {hint}allowed keys are {', '.join(self.names)}"
            )
        return option.name, option.convert(value, f"{self.key}.{name}")

    # -- reading ------------------------------------------------------------------
    def read(
        self, section: Mapping[str, object] | None = None, *, defaults: bool = True
    ) -> dict[str, Any]:
        """The typed values of ``section`` by declared name; ConfigError on the first bad entry.

        Without ``section``: the section ``accel launch`` passed to this process
        (``ACCEL_LAUNCH_CONFIG``; empty outside ``accel launch``). With ``defaults`` every
        declared key is present (its default when not set); without, only the keys set
        (to something other than None) - what a plugin object needs to tell "set in the
        config" from "left to its own default".
        """
        if section is None:
            section = launched_config().get(self.key) or {}
        if not isinstance(section, Mapping):
            raise ConfigError(
                f"{self.key} must be a mapping of {self.title} settings, not {type(section).__name__}"
            )
        values = self.defaults() if defaults else {}
        for name, value in section.items():
            if value is None and name in self._index:
                continue
            canonical, converted = self._convert(name, value)
            values[canonical] = converted
        return values

    def current(self, section: Mapping[str, object]) -> dict[str, object]:
        """``section`` as written today: each alias key renamed to its declared name
        (``fsdp_backward_prefetch_policy`` -> ``fsdp_backward_prefetch``) and each choice
        spelled as declared (``2`` -> ``SHARD_GRAD_OP``, ``no_wrap`` -> ``NO_WRAP``).

        Other values, unknown keys and values that are not allowed are kept as written
        (:meth:`validate` reports those); a declared name wins over its alias.
        """
        result: dict[str, object] = {}
        for name, value in section.items():
            option = self._index.get(name) if isinstance(name, str) else None
            if option is None:
                result[name] = value
                continue
            if option.choices and value is not None:
                try:
                    value = option.convert(value, f"{self.key}.{name}")
                except ConfigError:
                    pass
            if name == option.name or option.name not in section:
                result[option.name] = value
        return result

    # -- flags --------------------------------------------------------------------
    def flag_of(self, option: Option | str) -> str | None:
        """The ``accel launch`` flag of a key (``--fsdp_version``), or None when it has none."""
        option = option if isinstance(option, Option) else self[option]
        if option.flag is None:
            return None
        if option.flag:
            return "--" + option.flag
        prefix = self.flag_prefix
        name = option.name if not prefix or option.name.startswith(prefix) else prefix + option.name
        return "--" + name

    def flags_of(self, option: Option | str) -> list[str]:
        """Every option string of a key's flag, the main one first (empty when it has none)."""
        option = option if isinstance(option, Option) else self[option]
        flag = self.flag_of(option)
        if flag is None:
            return []
        aliases = [a if a.startswith("-") else "--" + a for a in option.flag_aliases]
        return [flag, *aliases]

    def dest_of(self, option: Option | str) -> str:
        """Where a parsed flag puts its value: ``<section>.<key>``, or the key for core's top
        level and sections with :attr:`flat_dests`."""
        option = option if isinstance(option, Option) else self[option]
        return f"{self.key}.{option.name}" if self.key and not self.flat_dests else option.name

    def help_of(self, option: Option | str) -> str:
        """The flag's help: the key's help (or what it accepts), after the section's title."""
        option = option if isinstance(option, Option) else self[option]
        text = option.help or option.describe()
        return f"{self.title}: {text}" if self.key else text

    def add_arguments(self, parser: _Parser, *, check: bool = True, plugin: str = "") -> None:
        """Add one flag per key with a flag to an argparse parser or group.

        Each flag's ``dest`` is :meth:`dest_of` (``<section>.<key>``), its default None; with
        ``check`` a value is converted as it is parsed (argparse then prints ``argument --flag:
        <problem>``) and kept as typed, so the section holds what the user wrote, exactly as a
        config file does. Without ``check`` it is converted where it is used, with the same
        :meth:`Option.convert`. A key with a :attr:`Option.group` goes under that heading when
        ``parser`` is a parser (not already a group). Only the keys whose
        :attr:`Option.plugin` is ``plugin`` are added. Each argparse action made records its
        declaration (``action.accel_declaration == (section, option)``).
        """
        for option in self.options:
            names = self.flags_of(option)
            if not names or option.plugin != plugin:
                continue
            target = _group(parser, option.group)
            kwargs: dict[str, Any] = {
                "dest": self.dest_of(option),
                "default": None,
                "help": self.help_of(option),
            }
            if option.store_true:
                actions = [target.add_argument(*names, action="store_true", **kwargs)]
                if option.off_flag:
                    kwargs["help"] = f"sets {option.name} to false"
                    off = target.add_argument(
                        "--" + option.off_flag, action="store_false", **kwargs
                    )
                    actions.append(off)
            else:
                if check:
                    kwargs["type"] = _flag_type(option, names[0])
                if option.repeatable:
                    kwargs["action"] = "append"
                actions = [target.add_argument(*names, metavar=option.shown_metavar, **kwargs)]
            for action in actions:  # an attribute of accel's own on argparse's object
                vars(action)["accel_declaration"] = (self, option)

    # -- questions ----------------------------------------------------------------
    def ask(
        self,
        ask: Any,
        name: str,
        question: str | None = None,
        default: Any = _MISSING,
        choices: Sequence[object] | None = None,
        key: str | None = None,
    ) -> Any:
        """Ask for key ``name`` with an ``accel config`` :class:`~accel_cli.questions.Ask`.

        A choice is a select (``choices`` may narrow or reorder the declared ones), a bool a
        confirm, an int an integer (with the minimum), a float a number, anything else text
        checked by the declaration. ``default`` defaults to the declared default; the answer's
        key is ``<section>.<name>`` (core's top level: ``<name>``; what ``accel config
        --answers`` files use). Returns the
        typed answer (text keys: the text as typed, stripped).
        """
        option = self[name]
        text = question or option.question or option.help or name
        label = f"{self.key}.{option.name}" if self.key else option.name
        key = key or label
        value = option.default if default is _MISSING else default
        if option.choices:
            shown = [str(c) for c in (choices if choices is not None else option.choices)]
            answer = ask.select(text, shown, default=None if value is None else str(value), key=key)
            return option.convert(answer, label)
        if option.type == "bool":
            return bool(ask.confirm(text, default=bool(value), key=key))
        if option.type == "int" and not option.extra:
            minimum = None if option.minimum is None else int(option.minimum)
            return ask.integer(text, 0 if value is None else int(value), key=key, minimum=minimum)
        if option.type == "float" and option.reader is None and not option.extra:
            return ask.number(text, 0.0 if value is None else float(value), key=key)

        def check(answer: str) -> str | None:
            if not answer.strip():
                return None if option.type in ("str", "list") else f"enter {option.describe()}"
            try:
                option.convert(answer, label)
            except ConfigError as error:
                return str(error)
            return None

        answer = ask.text(text, "" if value is None else str(value), key=key, validate=check)
        answer = answer.strip()
        if option.type in ("str", "list") or not answer:
            return answer
        return option.convert(answer, label)


def _flag_type(option: Option, flag: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        try:
            option.convert(text, flag)
        except ConfigError as error:
            raise argparse.ArgumentTypeError(str(error).removeprefix(f"{flag}=")) from None
        return text

    return parse


def _group(parser: _Parser, title: str) -> _Parser:
    """The argument group ``title`` of ``parser`` (made on first use); ``parser`` itself when
    ``title`` is empty or ``parser`` is already a group."""
    if not title or not isinstance(parser, argparse.ArgumentParser):
        return parser
    for group in parser._action_groups:
        if group.title == title:
            return group
    return parser.add_argument_group(title)


def _copy(value: _T) -> _T:
    """A default handed out: a fresh list or mapping, so that no caller changes the declared one."""
    return copy.copy(value)


LAUNCH_CONFIG = Option(
    "launch_config",
    str,
    None,
    help="JSON of the settings accel launch resolved",
    env=env_vars.LAUNCH_CONFIG,
    flag=None,
    in_file=False,
)
"""``ACCEL_LAUNCH_CONFIG``, declared here because :meth:`Section.read` reads it
(:data:`accel.config.core_options.PROCESS_SECTION` lists it with the other process variables)."""


def launched_config() -> dict[str, Any]:
    """In a process started by ``accel launch``: the resolved settings (``ACCEL_LAUNCH_CONFIG``).

    Plugins read their section here (``launched_config().get("fsdp_config", {})``).
    Empty outside ``accel launch``. Public as :func:`accel.config.launched.launched_config`.
    """
    raw = LAUNCH_CONFIG.from_env()
    if not raw:
        return {}
    try:
        data = json.loads(raw)
    except json.JSONDecodeError:
        raise ConfigError(
            f"environment variable {env_vars.LAUNCH_CONFIG} is not valid JSON; "
            "it is set by accel launch, unset it"
        ) from None
    return data if isinstance(data, dict) else {}


__all__ = [
    "Option",
    "Section",
    "parse_bool",
]
