"""Execute the runnable blocks of one docs page: ``python run_page.py <page.md> <scratch dir>``.

Run by test_code_blocks.py in a fresh interpreter per page (see collect.py for the rules).
"""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from collect import blocks, runnable_source  # noqa: E402
from setups import SETUPS  # noqa: E402


def main(page: Path, scratch: Path) -> int:
    """Write the file blocks, then run the run blocks in order; 1 on the first failure."""
    found = blocks(page)
    for block in found:
        if block.kind == "file":
            target = scratch / block.path
            target.parent.mkdir(parents=True, exist_ok=True)
            for parent in target.relative_to(scratch).parents:
                if parent != Path(".") and not (scratch / parent / "__init__.py").exists():
                    (scratch / parent / "__init__.py").touch()
            target.write_text(block.source, encoding="utf-8")
    os.chdir(scratch)
    sys.path.insert(0, str(scratch))
    for block in found:  # each file block must at least import
        if block.kind == "file":
            importlib.import_module(block.path[: -len(".py")].replace("/", "."))
    namespace: dict = {"__name__": "__docs__"}
    for block in found:
        if block.kind != "run":
            continue
        try:
            undo = [SETUPS[name](namespace) for name in block.setups]
            before = set(namespace)
            exec(compile(runnable_source(block), block.where, "exec"), namespace)
            for cleanup in undo:
                if cleanup is not None:
                    cleanup()
            for name in sorted(set(namespace) - before):
                if name.startswith("test_") and callable(namespace[name]):
                    namespace[name]()
        except BaseException:
            print(f"FAILED {block.where}", file=sys.stderr)
            traceback.print_exc()
            return 1
        print(f"ok {block.where}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(Path(sys.argv[1]), Path(sys.argv[2])))
