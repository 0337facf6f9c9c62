"""The ``accel`` command line: config, env, launch, test, estimate-memory, plugins, merge-weights.

Importing this package is cheap: every subcommand imports what it needs when it runs.
"""

__version__ = "0.1.0"
