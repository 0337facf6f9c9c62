"""MkDocs hooks for the accel site (see ``hooks:`` in mkdocs.yml).

* ``<!-- needs: WHAT: reason -->`` before a code block (the marker the docs test reads, see
  integration-tests/docs/collect.py) becomes a visible admonition, so the reason a block is
  not run is shown on the page, from the same text the test suite reads.
* Links from a page to a file outside ``docs/`` (``../README.md``, ``../packages/...``) work
  when the Markdown is read on a code host; on the site they point to the page covering that
  package, or to ``repo_url`` when it is set, or become plain text.
"""

from __future__ import annotations

import posixpath
import re
from typing import Any

NEEDS = re.compile(
    r"^(?P<indent>[ \t]*)<!--\s*needs:\s*(?P<what>[^:>]+?)\s*:\s*(?P<why>.+?)\s*-->\s*$", re.M
)
LINK = re.compile(r"(?<!!)\[(?P<text>[^\]\n]+)\]\((?P<target>\.\./[^)\s#]+)(?P<anchor>#[^)\s]*)?\)")

# The page that covers each package README on the site.
PACKAGE_PAGES = {
    "README.md": "index.md",
    "packages/accel-core/README.md": "api/core.md",
    "packages/accel-ddp/README.md": "distributed.md",
    "packages/accel-cli/README.md": "launching.md",
    "packages/accel-fsdp/README.md": "fsdp.md",
    "packages/accel-deepspeed/README.md": "deepspeed.md",
    "packages/accel-megatron/README.md": "megatron.md",
    "packages/accel-tpu/README.md": "tpu.md",
    "packages/accel-fp8/README.md": "fp8.md",
    "packages/accel-bnb/README.md": "bnb.md",
    "packages/accel-trackers/README.md": "trackers.md",
    "packages/accel-profiler/README.md": "profiler.md",
    "packages/accel-cluster/README.md": "cluster.md",
}


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Render the ``needs`` markers and map links that leave ``docs/``."""
    markdown = NEEDS.sub(_admonition, markdown)
    page_dir = posixpath.dirname(page.file.src_uri)
    repo_url = (config.get("repo_url") or "").rstrip("/")

    def link(match: re.Match[str]) -> str:
        target = posixpath.normpath(posixpath.join("docs", page_dir, match["target"]))
        if target.startswith("docs/"):
            return match[0]  # still inside docs/: MkDocs checks it
        text, anchor = match["text"], match["anchor"] or ""
        page_uri = PACKAGE_PAGES.get(target)
        if page_uri is not None:
            rel = posixpath.relpath(page_uri, page_dir or ".")
            return f"[{text}]({rel})"
        if repo_url:
            return f"[{text}]({repo_url}/blob/main/{target}{anchor})"
        return text

    return LINK.sub(link, markdown)


def _admonition(match: re.Match[str]) -> str:
    indent = match["indent"]
    what, why = match["what"].strip(), match["why"].strip()
    return f'{indent}!!! warning "Needs {what}"\n{indent}    Not run by the test suite: {why}\n'
