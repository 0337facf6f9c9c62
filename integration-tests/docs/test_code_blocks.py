"""Every Python block in docs/ is run, included from a tested example, or marked with what it needs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from collect import DOCS, REPO, blocks, pages  # noqa: E402
from test_examples import EXAMPLES, TESTED_ELSEWHERE  # noqa: E402

HERE = Path(__file__).parent
PAGES = pages()
RUN_PAGES = [p for p in PAGES if any(b.kind in ("run", "file") for b in blocks(p))]


def _id(page: Path) -> str:
    return str(page.relative_to(DOCS))


def test_docs_have_python_blocks():
    kinds = {b.kind for p in PAGES for b in blocks(p)}
    assert {"run", "included", "needs"} <= kinds, kinds


@pytest.mark.parametrize("page", PAGES, ids=_id)
def test_blocks_are_classified(page):
    """Included snippets exist and are tested; hardware marks give a reason."""
    for block in blocks(page):
        if block.kind == "needs":
            what, _, why = block.needs.partition(":")
            assert what.strip() and why.strip(), (
                f"{block.where}: write <!-- needs: WHAT: reason -->"
            )
        elif block.kind == "included":
            for path, section in block.includes:
                file = REPO / path
                assert file.is_file(), f"{block.where}: {path} does not exist"
                assert file.name in EXAMPLES or file.name in TESTED_ELSEWHERE, (
                    f"{block.where}: {path} is not run by test_examples.py"
                )
                if section:
                    text = file.read_text(encoding="utf-8")
                    assert re.search(rf"--8<-- \[start:{re.escape(section)}\]", text), (
                        f"{block.where}: no section {section!r} in {path}"
                    )


@pytest.mark.timeout(300)
@pytest.mark.parametrize("page", RUN_PAGES, ids=_id)
def test_page_blocks_run(page, tmp_path):
    """The page's runnable blocks, in order, in one fresh interpreter."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACCEL_")}
    env.update(OMP_NUM_THREADS="1", ACCEL_USE_CPU="1", HOME=str(tmp_path))
    result = subprocess.run(
        [sys.executable, str(HERE / "run_page.py"), str(page), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=280,
        env=env,
    )
    assert result.returncode == 0, f"{result.stdout[-3000:]}\n{result.stderr[-6000:]}"
