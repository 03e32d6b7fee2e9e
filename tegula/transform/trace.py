"""A trace: the IR at every point of a pipeline run, with pass names, times and verifier problems.

:class:`Trace` is what the :class:`~tegula.transform.instruments.Record` instrument fills while a
:class:`~tegula.transform.pipeline.Pipeline` runs, and what ``tegula.tools.trace`` returns. Step 0
is the IR the pipeline was given (named ``input``); step ``i`` the IR after its ``i``-th pass.
"""
from __future__ import annotations

import difflib
import hashlib
import os
from dataclasses import dataclass, field
from typing import Any, Iterable, Optional, Union

from tegula.errors import ConfigError
from tegula.ir.stmt import PrimFunc
from tegula.transform.trace_html import trace_to_html

INPUT = "input"

Point = Union[str, int]


@dataclass
class Step:
    """One point of a trace: the IR after the pass ``name`` (or the ``input`` tile IR)."""

    name: str
    seconds: float
    ir: str
    problems: list[str] = field(default_factory=list)
    func: Optional[PrimFunc] = field(default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        """True when the verifier found nothing wrong with this step's IR."""
        return not self.problems


class Trace(list):
    """The steps of one lowering, in order (a ``list`` of :class:`Step`).

    ``error`` holds the exception that stopped the pipeline, if any (the steps before it are
    kept). Index it by position or by pass name: ``tr[3]``, ``tr["LowerTileOps"]``.
    """

    def __init__(self, steps: Iterable[Step] = (), func_name: str = "", target: str = "",
                 error: Optional[BaseException] = None):
        super().__init__(steps)
        self.func_name = func_name
        self.target = target
        self.error = error

    def names(self) -> list[str]:
        """Step names in order, ``input`` first."""
        return [s.name for s in self]

    def index(self, point: Any, *args: Any) -> int:  # type: ignore[override]
        """Position of a step given by name (case-insensitive) or by position (negative counts
        from the end); raises ConfigError naming the steps when there is none."""
        if args or isinstance(point, Step):
            return super().index(point, *args)
        if isinstance(point, bool) or not isinstance(point, (int, str)):
            raise ConfigError(f"a trace point is a pass name or a position, got {point!r}")
        if isinstance(point, int):
            if -len(self) <= point < len(self):
                return point % len(self)
            raise ConfigError(f"trace point {point} is out of range: the trace has {len(self)} "
                              f"steps (0 = {INPUT} .. {len(self) - 1})")
        names = self.names()
        for i, n in enumerate(names):
            if n == point:
                return i
        for i, n in enumerate(names):
            if n.lower() == point.lower():
                return i
        close = difflib.get_close_matches(point, names, n=1)
        raise ConfigError(f"no pass named {point!r} in this trace",
                          hint=(f"did you mean {close[0]!r}? " if close else "")
                          + f"steps: {', '.join(names)}")

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return super().__getitem__(self.index(key))
        return super().__getitem__(key)

    @property
    def total_seconds(self) -> float:
        return sum(s.seconds for s in self)

    @property
    def problems(self) -> list[str]:
        """Every verifier problem, prefixed by the step it was found in."""
        return [f"{s.name}: {p}" for s in self for p in s.problems]

    def diff(self, a: Point = INPUT, b: Point = -1, context: int = 3) -> str:
        """Unified diff of the IR from point ``a`` to point ``b`` (empty when they print alike)."""
        i, j = self.index(a), self.index(b)
        x, y = self[i], self[j]
        return "".join(difflib.unified_diff(
            x.ir.splitlines(keepends=True), y.ir.splitlines(keepends=True),
            fromfile=f"{self.func_name} @ [{i}] {x.name}", tofile=f"{self.func_name} @ [{j}] {y.name}",
            n=context))

    def timings(self) -> str:
        """A table of pass times in milliseconds."""
        width = max([len(n) for n in self.names()] + [4])
        rows = [f"{'#':>3}  {'pass':<{width}}  {'ms':>9}  lines  problems"]
        for i, s in enumerate(self):
            rows.append(f"{i:>3}  {s.name:<{width}}  {s.seconds * 1e3:>9.3f}  {s.ir.count(chr(10)) + 1:>5}"
                        f"  {len(s.problems)}")
        rows.append(f"     {'total':<{width}}  {self.total_seconds * 1e3:>9.3f}")
        return "\n".join(rows)

    def format(self, ir: bool = True) -> str:
        """The whole trace as text: a header per step, its IR and problems, then the timings."""
        out = [f"# trace of '{self.func_name}' for {self.target}: {len(self)} steps"]
        for i, s in enumerate(self):
            out.append(f"\n== [{i}] {s.name}  ({s.seconds * 1e3:.3f} ms) ==")
            if ir:
                out.append(s.ir.rstrip("\n"))
            out.extend(f"!! verifier: {p}" for p in s.problems)
        if self.error is not None:
            out.append(f"\n!! the pipeline stopped: {type(self.error).__name__}: {self.error}")
        out.append("\n" + self.timings())
        return "\n".join(out)

    def __str__(self) -> str:
        return self.format()

    def __repr__(self) -> str:
        return f"<Trace {self.func_name} {self.target}: {', '.join(self.names())}>"

    def to_html(self, title: Optional[str] = None) -> str:
        """One self-contained HTML page (see :mod:`tegula.transform.trace_html`)."""
        return trace_to_html(self, title)


def dump(tr: Trace, directory: str) -> list[str]:
    """Write ``tr`` to ``directory`` as ``<name>-<hash>.trace.txt`` and ``.trace.html``; returns
    the paths. The hash is of the input IR and target, so distinct builds do not overwrite."""
    os.makedirs(directory, exist_ok=True)
    h = hashlib.sha256((tr.target + "\n" + (tr[0].ir if tr else "")).encode()).hexdigest()[:10]
    safe = "".join(c if c.isalnum() or c in "_-" else "_" for c in tr.func_name) or "kernel"
    base = os.path.join(directory, f"{safe}-{h}.trace")
    paths = []
    for ext, text in (("txt", tr.format()), ("html", tr.to_html())):
        path = f"{base}.{ext}"
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)
        paths.append(path)
    return paths
