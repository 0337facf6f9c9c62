"""docs/elastic.md's example, run as the page says (on 2 processes, then on 1), logs the lines
the page shows."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from collect import DOCS, FENCE  # noqa: E402
from test_examples import ACCEL, EXAMPLES_DIR  # noqa: E402

SCRIPT = EXAMPLES_DIR / "elastic_resize.py"  # docs/examples/elastic_resize.py
PAGE = DOCS / "elastic.md"


def shown_output(page: Path, include: str) -> list[str]:
    """The lines of the first ``text`` block after the block that includes ``include``."""
    lines = page.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if f'--8<-- "{include}' in line)
    opening = next(
        i
        for i in range(start + 2, len(lines))
        if (m := FENCE.match(lines[i])) and m["lang"] == "text"
    )
    end = next(i for i in range(opening + 1, len(lines)) if re.match(r"^\s*```\s*$", lines[i]))
    return lines[opening + 1 : end]


@pytest.mark.timeout(600)
def test_the_example_logs_what_the_page_shows(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACCEL_", "ACCELERATE_"))}
    env.update(OMP_NUM_THREADS="1", HOME=str(tmp_path))
    runs = []
    for processes in (2, 1):
        command = [ACCEL, "launch", "--cpu", "--num_processes", str(processes), str(SCRIPT)]
        result = subprocess.run(
            command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=280
        )
        assert result.returncode == 0, result.stderr[-6000:]
        runs.append(result)
    logged = [line for line in runs[1].stderr.splitlines() if line.strip()]
    assert logged == shown_output(PAGE, "docs/examples/elastic_resize.py")
