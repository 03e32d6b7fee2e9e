"""Regenerate the golden pass files (``tests/transform/golden/*.txt``) and print what changed.

    python -m tests.transform.regen            # every pass
    python -m tests.transform.regen InferLayouts PipelineCopies

Review the printed diff (or ``git diff tests/transform/golden``) before committing: a golden file
changes only when a pass was meant to change what it does.
"""
from __future__ import annotations

import difflib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from golden_cases import CASES, GOLDEN, path_of, render  # noqa: E402


def regen(names: list[str]) -> int:
    """Rewrite the golden files of ``names``; prints a unified diff of each change. Returns how
    many files changed."""
    GOLDEN.mkdir(exist_ok=True)
    changed = 0
    for name in names:
        path = path_of(name)
        old = path.read_text() if path.exists() else ""
        new = render(name)
        if new == old:
            continue
        changed += 1
        sys.stdout.writelines(difflib.unified_diff(old.splitlines(keepends=True), new.splitlines(keepends=True),
                                                   fromfile=f"a/{path.name}", tofile=f"b/{path.name}"))
        path.write_text(new)
    print(f"{changed} of {len(names)} golden files changed")
    return changed


if __name__ == "__main__":
    unknown = [n for n in sys.argv[1:] if n not in CASES]
    if unknown:
        sys.exit(f"no golden case for {', '.join(unknown)}; cases: {', '.join(CASES)}")
    regen(sys.argv[1:] or list(CASES))
