"""Find the fenced Python blocks of docs/**/*.md and what each one needs.

A block is one of:

* **included**: its body is only ``--8<-- "docs/examples/<file>.py[:section]"`` lines (the
  page shows part of a runnable example); the example itself runs in ``test_examples.py``.
* **needs**: preceded by ``<!-- needs: WHAT: reason -->``; not run. The site renders the same
  comment as a visible "Needs WHAT" admonition with the reason (docs/_ext/hooks.py).
* **file**: preceded by ``<!-- docs-test: file path/to/module.py -->``, or whose first line is
  a ``# path/to/module.py`` comment: written to that path in the page's scratch directory
  (which is on ``sys.path``) and imported, so later blocks can import it.
* **run** (everything else): executed, in page order, in one namespace per page, in a fresh
  interpreter whose working directory is a scratch directory. ``>>>`` blocks run their input
  lines. A ``test_*`` function a block defines is called.

``<!-- docs-test: setup NAME -->`` before a run block runs the named setup of
``setups.py`` first (for instance: register a plugin written by earlier file blocks).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"

FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<lang>[\w+-]*)[^\n]*$")
COMMENT = re.compile(r"^\s*<!--\s*(?P<body>.*?)\s*-->\s*$")
SNIPPET = re.compile(r'^\s*-{1,}8<-{1,}\s+"(?P<path>[^"]+?)(?::(?P<section>[\w-]+))?"\s*$')
FILE_COMMENT = re.compile(r"^#\s*(?P<path>[\w./-]+\.py)\s*$")


@dataclass
class Block:
    """One fenced Python block of a page."""

    page: Path
    line: int  # 1-based line of the opening fence
    source: str
    kind: str  # "run", "file", "needs", "included"
    needs: str = ""
    path: str = ""  # for "file"
    setups: list[str] = field(default_factory=list)
    includes: list[tuple[str, str | None]] = field(default_factory=list)

    @property
    def where(self) -> str:
        """``docs/page.md:line``."""
        return f"{self.page.relative_to(REPO)}:{self.line}"


def pages() -> list[Path]:
    """Every Markdown page under docs/."""
    return sorted(p for p in DOCS.rglob("*.md") if "_ext" not in p.parts)


def blocks(page: Path) -> list[Block]:
    """The Python blocks of ``page``, classified."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    comments: list[str] = []
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if match is None:
            comment = COMMENT.match(lines[i])
            if comment:
                comments.append(comment["body"])
            elif lines[i].strip():
                comments = []
            i += 1
            continue
        fence, indent, lang, start = match["fence"], match["indent"], match["lang"], i
        body = []
        i += 1
        while i < len(lines) and not (
            lines[i].strip().startswith(fence) and lines[i].strip().strip(fence[0]) == ""
        ):
            body.append(lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i])
            i += 1
        i += 1
        if lang.lower() in ("python", "py", "pycon"):
            found.append(_classify(page, start + 1, "\n".join(body) + "\n", comments))
        comments = []
    return found


def _classify(page: Path, line: int, source: str, comments: list[str]) -> Block:
    block = Block(page, line, source, "run")
    for comment in comments:
        if comment.startswith("needs:"):
            block.kind, block.needs = "needs", comment[len("needs:") :].strip()
        elif comment.startswith("docs-test:"):
            verb, _, arg = comment[len("docs-test:") :].strip().partition(" ")
            if verb == "file":
                block.kind, block.path = "file", arg.strip()
            elif verb == "setup":
                block.setups.append(arg.strip())
            else:
                raise ValueError(f"{block.where}: unknown docs-test directive {comment!r}")
    if block.kind != "run":
        return block
    code = [ln for ln in source.splitlines() if ln.strip()]
    snippets = [SNIPPET.match(ln) for ln in code]
    if code and all(snippets):
        block.kind = "included"
        block.includes = [(m["path"], m["section"]) for m in snippets]
    elif code and FILE_COMMENT.match(code[0]):
        block.kind, block.path = "file", FILE_COMMENT.match(code[0])["path"]
    return block


def runnable_source(block: Block) -> str:
    """The code to execute: ``>>>`` / ``...`` input lines of a console block, else the block."""
    lines = block.source.splitlines()
    if any(ln.lstrip().startswith(">>>") for ln in lines):
        out = []
        for ln in lines:
            stripped = ln.lstrip()
            if stripped.startswith((">>> ", "... ")) or stripped in (">>>", "..."):
                out.append(stripped[4:])
        return "\n".join(out) + "\n"
    return block.source
