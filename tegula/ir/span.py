"""Source spans: where in the user's file an IR node came from."""
from __future__ import annotations

import contextlib
import linecache
import os
import threading
from dataclasses import dataclass
from typing import Iterator, Optional


@dataclass(frozen=True)
class Span:
    """A position in user source: absolute ``file``, 1-based ``line`` and 0-based ``col``."""

    file: str
    line: int
    col: int = 0
    end_col: Optional[int] = None

    def source_line(self) -> str:
        return linecache.getline(self.file, self.line).rstrip("\n")

    def short(self) -> str:
        return f"{os.path.basename(self.file)}:{self.line}"

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col + 1}"

    def excerpt(self) -> str:
        """``--> file:line:col``, the source line and a caret under the column."""
        src = self.source_line()
        num = str(self.line)
        pad = " " * len(num)
        out = [f"  --> {self}", f"{pad} |"]
        if src:
            width = 1
            if self.end_col is not None and self.end_col > self.col:
                width = min(self.end_col - self.col, max(1, len(src) - self.col))
            out.append(f"{num} | {src}")
            out.append(f"{pad} | {' ' * self.col}{'^' * width}")
        return "\n".join(out)


# The span stamped on every node built while the frontend visits one piece of user code; one
# stack per thread, since kernels may be built from several threads at once (the autotuner).
_local = threading.local()


def _stack() -> list:
    st = getattr(_local, "stack", None)
    if st is None:
        st = _local.stack = [None]
    return st


def current_span() -> Optional[Span]:
    return _stack()[-1]


@contextlib.contextmanager
def span_scope(span: Optional[Span]) -> Iterator[None]:
    """Nodes created inside this scope carry ``span`` unless given one explicitly."""
    st = _stack()
    st.append(span if span is not None else st[-1])
    try:
        yield
    finally:
        st.pop()
