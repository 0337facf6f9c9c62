"""The ``accel config`` questionnaire: core questions, then each plugin's (``accel_config_questions``).

Questions go through an :class:`Ask` object, which plugins receive too::

    @hookimpl
    def accel_config_questions(ask, config):
        if ask.confirm("Do you want to use FSDP?", default=False, key="use_fsdp"):
            config["distributed_type"] = "FSDP"
            config["fsdp_config"] = {"fsdp_version": ask.select(
                "FSDP version?", ["2", "1"], default="2", key="fsdp_config.fsdp_version")}

Every method takes an optional ``key`` naming the answer, so a questionnaire can
also be answered from a file (``accel config --answers answers.yaml``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any


class Ask:
    """How questions are asked. Subclasses: :class:`PromptAsk` (terminal), :class:`ScriptedAsk`."""

    def select(
        self,
        question: str,
        choices: Sequence[str],
        default: str | None = None,
        key: str | None = None,
    ) -> str:
        """One of ``choices``."""
        raise NotImplementedError

    def confirm(self, question: str, default: bool = False, key: str | None = None) -> bool:
        """Yes or no."""
        raise NotImplementedError

    def text(
        self,
        question: str,
        default: str = "",
        key: str | None = None,
        validate: Callable[[str], str | None] | None = None,
    ) -> str:
        """Free text; ``validate`` returns an error message or None."""
        raise NotImplementedError

    def integer(
        self, question: str, default: int = 0, key: str | None = None, minimum: int | None = None
    ) -> int:
        """A whole number (>= ``minimum``)."""

        def check(answer: str) -> str | None:
            try:
                value = int(answer.strip())
            except ValueError:
                return "enter a whole number"
            if minimum is not None and value < minimum:
                return f"enter a number >= {minimum}"
            return None

        return int(self.text(question, str(default), key=key, validate=check).strip())

    def number(self, question: str, default: float = 0.0, key: str | None = None) -> float:
        """A number."""

        def check(answer: str) -> str | None:
            try:
                float(answer.strip())
            except ValueError:
                return "enter a number"
            return None

        return float(self.text(question, str(default), key=key, validate=check).strip())


class PromptAsk(Ask):
    """Asks in the terminal with questionary (prompt_toolkit)."""

    def __init__(self, **prompt_kwargs: Any) -> None:
        import questionary

        self._q = questionary
        self._kw = prompt_kwargs  # e.g. input= / output= for tests

    def select(self, question, choices, default=None, key=None):  # noqa: D102
        q = self._q.select(question, choices=list(choices), default=default, **self._kw)
        return q.unsafe_ask()

    def confirm(self, question, default=False, key=None):  # noqa: D102
        return bool(self._q.confirm(question, default=default, **self._kw).unsafe_ask())

    def text(self, question, default="", key=None, validate=None):  # noqa: D102
        def check(answer: str) -> bool | str:
            if validate is None:
                return True
            problem = validate(answer)
            return True if problem is None else problem

        q = self._q.text(question, default=str(default), validate=check, **self._kw)
        return q.unsafe_ask()


class AnswerError(ValueError):
    """A scripted answer is not acceptable."""


class ScriptedAsk(Ask):
    """Answers from a mapping (by ``key``, else by question text); defaults otherwise.

    Used by ``accel config --answers FILE`` / ``--defaults`` and by tests.
    ``asked`` records ``(key or question, answer)`` in order.
    """

    def __init__(self, answers: Mapping[str, object] | None = None) -> None:
        self.answers = dict(answers or {})
        self.asked: list[tuple[str, object]] = []
        self._used: set[str] = set()

    def _lookup(self, question: str, key: str | None, default: object) -> object:
        for name in (key, question):
            if name is not None and name in self.answers:
                self._used.add(name)
                return self.answers[name]
        return default

    def unused(self) -> list[str]:
        """Answers given that no question asked for."""
        return [k for k in self.answers if k not in self._used]

    def select(self, question, choices, default=None, key=None):  # noqa: D102
        answer = self._lookup(question, key, default if default is not None else choices[0])
        answer = str(answer) if not isinstance(answer, bool) else ("yes" if answer else "no")

        def norm(text: str) -> str:
            return text.strip().lower().replace("_", "-")

        matches = [c for c in choices if norm(c) == norm(answer)] or [
            c for c in choices if norm(c).startswith(norm(answer) + " ")
        ]
        if not matches:
            raise AnswerError(f"{key or question}: {answer!r} is not one of {', '.join(choices)}")
        self.asked.append((key or question, matches[0]))
        return matches[0]

    def confirm(self, question, default=False, key=None):  # noqa: D102
        answer = self._lookup(question, key, default)
        if isinstance(answer, str):
            from accel.config.options import parse_bool
            from accel.errors import ConfigError

            try:
                answer = parse_bool(key or question, answer)  # accel's one yes/no table
            except ConfigError:
                raise AnswerError(f"{key or question}: {answer!r} is not yes or no") from None
        self.asked.append((key or question, bool(answer)))
        return bool(answer)

    def text(self, question, default="", key=None, validate=None):  # noqa: D102
        answer = str(self._lookup(question, key, default))
        if validate is not None:
            problem = validate(answer)
            if problem:
                raise AnswerError(f"{key or question}: {answer!r}: {problem}")
        self.asked.append((key or question, answer))
        return answer


NO_DISTRIBUTION = "No distributed training"
"""The first answer of "Which type of machine are you using?" (``distributed_type: NO``)."""


def machine_types() -> dict[str, str]:
    """The machine-type answers and their distributed type: one process, then data
    parallelism on each device kind the catalog knows (``multi-GPU``: ``MULTI_GPU``, ...)."""
    from accel import catalog

    types = {NO_DISTRIBUTION: "NO"}
    types.update({name.replace("MULTI_", "multi-"): name for name in catalog.DATA_PARALLEL_TYPES})
    return types


def _valid_ids(answer: str) -> str | None:
    from accel.config.core_options import KEYS
    from accel.errors import ConfigError

    try:
        KEYS["gpu_ids"].convert(answer, "gpu_ids")
    except ConfigError:
        return "enter all, or GPU ids separated by commas such as 0,1"
    return None


def _valid_host(answer: str) -> str | None:
    return None if answer.strip() and " " not in answer.strip() else "enter a host name or IP"


def ask_questions(ask: Ask, plugin_questions: bool = True) -> dict[str, object]:
    """Run the questionnaire; the config mapping (Accelerate's keys) it produced."""
    from accel import catalog
    from accel.config.core_options import CORE_SECTION, DYNAMO_BACKENDS, DYNAMO_SECTION

    config: dict[str, object] = {"compute_environment": "LOCAL_MACHINE"}
    types = machine_types()
    label = ask.select(
        "Which type of machine are you using?",
        list(types),
        default=NO_DISTRIBUTION,
        key="distributed_type",
    )
    dtype = types.get(label, label)
    config["distributed_type"] = dtype
    config["num_machines"] = 1
    config["machine_rank"] = 0
    if dtype != "NO":
        machines = ask.integer(
            "How many different machines will you use (use more than 1 for multi-node training)?",
            1,
            key="num_machines",
            minimum=1,
        )
        config["num_machines"] = machines
        if machines > 1:
            config["machine_rank"] = ask.integer(
                "What is the rank of this machine (0 for the main one)?",
                0,
                key="machine_rank",
                minimum=0,
            )
            config["main_process_ip"] = ask.text(
                "What is the IP address of the machine that will host the main process?",
                "",
                key="main_process_ip",
                validate=_valid_host,
            ).strip()
            config["main_process_port"] = ask.integer(
                "What is the port you will use to communicate with the main process?",
                29500,
                key="main_process_port",
                minimum=1,
            )
            config["same_network"] = ask.confirm(
                "Are all the machines on the same local network?", True, key="same_network"
            )
            config["rdzv_backend"] = CORE_SECTION.ask(ask, "rdzv_backend")
        config["debug"] = ask.confirm(
            "Should distributed operations be checked for errors (shape mismatches)? "
            "This can avoid hangs.",
            False,
            key="debug",
        )
    if dtype in ("NO", "MULTI_CPU"):
        config["use_cpu"] = dtype == "MULTI_CPU" or ask.confirm(
            "Do you want to run your training on CPU only (even if a GPU is available)?",
            False,
            key="use_cpu",
        )
    else:
        config["use_cpu"] = False
    if ask.confirm(
        "Do you wish to optimize your script with torch.compile?", False, key="use_dynamo"
    ):
        dynamo = {
            "dynamo_backend": DYNAMO_SECTION.ask(
                ask,
                "dynamo_backend",
                default="inductor",
                choices=[b.lower() for b in DYNAMO_BACKENDS if b != "NO"],
            )
        }
        for option in DYNAMO_SECTION.options[1:]:
            dynamo[option.name] = DYNAMO_SECTION.ask(ask, option.name)
        config["dynamo_config"] = dynamo
    precisions = [
        name
        for name, row in catalog.PRECISIONS.items()
        if row.package == catalog.CORE or _plugin_installed(row.package)
    ]
    config["mixed_precision"] = ask.select(
        "Do you wish to use mixed precision?", precisions, default="no", key="mixed_precision"
    )
    if plugin_questions:
        _plugin_questions(ask, config)
    dtype = config["distributed_type"]
    if dtype != "NO":
        default = 2 * config["num_machines"] if dtype == "MULTI_CPU" else config["num_machines"]
        config["num_processes"] = ask.integer(
            "How many processes in total will you use, over all machines?",
            default,
            key="num_processes",
            minimum=1,
        )
    else:
        config["num_processes"] = 1
    gpu_types = ("NO", catalog.DEVICE_KINDS["cuda"].distributed_type, *catalog.STRATEGY_TYPES)
    if not config["use_cpu"] and dtype in gpu_types:
        config["gpu_ids"] = ask.text(
            CORE_SECTION["gpu_ids"].question, "all", key="gpu_ids", validate=_valid_ids
        ).strip()
    return config


def _plugin_installed(package: str) -> bool:
    from accel.plugins import list_plugins

    return any(i.distribution == package and not i.error for i in list_plugins())


def _plugin_questions(ask: Ask, config: dict[str, object]) -> None:
    from accel.plugins import get_plugin_manager

    for impl in reversed(get_plugin_manager().hook.accel_config_questions.get_hookimpls()):
        impl.function(ask=ask, config=config)
