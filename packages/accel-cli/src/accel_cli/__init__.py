"""The ``accel`` command line: config, env, launch, test, estimate-memory, plugins, merge-weights,
to-fsdp2.

Importing this package is cheap: every subcommand imports what it needs when it runs.
"""


def __getattr__(name: str) -> str:
    """``__version__``: accel-cli's installed version, read from its metadata on first use."""
    if name != "__version__":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from accel.imports import installed_version

    value = globals()["__version__"] = installed_version("accel-cli")
    return value
