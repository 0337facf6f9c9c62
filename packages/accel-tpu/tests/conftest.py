"""Fixtures of accel-tpu's tests; the helpers they share are in :mod:`tpu_testing`.

``accel_cli`` runs ``accel`` in this process (fast: nothing imports torch_xla).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # `import tpu_testing` from the test modules


@pytest.fixture
def accel_cli(tmp_path, monkeypatch, capsys):
    """``accel_cli(*argv)`` -> ``(exit status, stdout, stderr)``, run in this process."""
    from accel.plugins import reset_plugin_manager
    from accel_cli.main import run

    for name in list(os.environ):
        if name.startswith(("ACCEL_", "PJRT_", "XLA_", "CPU_NUM_DEVICES")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("ACCEL_CONFIG_DIR", str(tmp_path / "accel-config"))
    monkeypatch.chdir(tmp_path)
    reset_plugin_manager()

    def call(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        try:
            status = run(list(argv))
        except SystemExit as exc:
            status = int(exc.code or 0)
        out, err = capsys.readouterr()
        return status, out, err

    yield call
    reset_plugin_manager()
