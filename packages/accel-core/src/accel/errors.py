"""Exceptions a user can act on; each message says what to do."""

from __future__ import annotations


class AccelError(Exception):
    """Base class of accel's own errors."""


class MissingPluginError(AccelError, ImportError):
    """A feature needs a plugin package that is not installed."""

    def __init__(self, feature: str, package: str, extra: str = ""):
        self.feature = feature
        self.package = package
        if " " in package:  # not a distribution name: no plugin is known to provide it
            message = f"{feature} is not provided by any installed plugin: install {package}{extra}"
        else:
            message = f"{feature} needs the {package} package: pip install {package}{extra}"
        super().__init__(message)


class ConfigError(AccelError, ValueError):
    """A configuration value is wrong; the message names the key and what is allowed."""


class UsageError(AccelError):
    """Bad input on a command line or to a launch; front ends print it on one line (exit 2)."""


class CheckpointError(AccelError, RuntimeError):
    """A checkpoint cannot be written or read."""


class ResumeError(CheckpointError, UsageError):
    """A checkpoint cannot continue on this run's layout (processes, batch sizes, parallelism).

    The message says what was saved, what this run has, and what would work; a launched
    worker prints it on one line and exits 2.
    """


def report_refusals_in_one_line(prog: str = "accel launch") -> None:
    """Make an uncaught :class:`UsageError` print ``<prog>: error: <message>`` and exit 2.

    For a script that ``accel launch`` runs directly (one process: no worker wrapper, no
    launcher left to report). Any other exception goes to the previous ``sys.excepthook``.
    """
    import os
    import sys

    previous = sys.excepthook
    if getattr(previous, "accel_refusals", False):
        return

    def hook(kind, value, traceback):  # type: ignore[no-untyped-def]
        if not isinstance(value, UsageError):
            previous(kind, value, traceback)
            return
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        # straight to the file descriptor: libraries may wrap sys.stderr (prefixing lines)
        os.write(2, f"{prog}: error: {value}\n".encode())
        os._exit(2)

    vars(hook)["accel_refusals"] = True  # the mark read above
    sys.excepthook = hook
