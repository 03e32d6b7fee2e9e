"""What a stretch of the pipeline did to a kernel: a unified diff of the IR between two points.

::

    import tegula.tools as tools
    print(tools.diff(matmul, "input", "PipelineCopies", 1024, 1024, 1024, target="cuda:sm_80"))

A point is a pass name (case-insensitive; the IR right after that pass), ``"input"`` (the tile IR
before any pass) or a position in the trace (0 = input, -1 = the last pass).

:func:`compare` puts two lowerings side by side pass by pass: two kernels, two variants of one
(``transpose_B=True`` against ``False``) or one kernel for two targets::

    a = tools.trace(matmul, 1024, 1024, 1024, target="cuda:sm_80")
    b = tools.trace(matmul, 1024, 1024, 1024, target="cuda:sm_90a")
    print(tools.compare(a, b, "sm_80", "sm_90a"))
"""
from __future__ import annotations

import difflib
from typing import Any, Optional

from tegula.tools.trace import Point, Trace, trace


def diff(kernel_or_func: Any, a: Point, b: Point, *args: Any, target: Any = None,
         pass_configs: Optional[dict] = None, context: int = 3, pipeline: Any = None,
         **kwargs: Any) -> str:
    """Unified diff of the IR from point ``a`` to point ``b`` of the pipeline for ``target``.

    ``kernel_or_func`` is what :func:`tegula.tools.trace` takes (a Trace is used as is; ``args``
    and ``kwargs`` go to a factory). Returns ``""`` when both points print alike. Raises
    ConfigError for a point the pipeline does not have, naming the points it has; when a pass
    fails before reaching a point, the error it raised.
    """
    tr = kernel_or_func if isinstance(kernel_or_func, Trace) else trace(
        kernel_or_func, *args, target=target, pass_configs=pass_configs, pipeline=pipeline, **kwargs)
    if tr.error is not None:
        names = tr.names()
        for p in (a, b):
            if isinstance(p, str) and p.lower() not in (n.lower() for n in names):
                raise tr.error
    return tr.diff(a, b, context=context)


def _pairs(a: Trace, b: Trace) -> list[tuple[Optional[int], Optional[int]]]:
    """Steps of ``a`` and ``b`` paired by pass name (the k-th run of a pass with the k-th), in
    ``a``'s order; a step only one of them has is paired with None, ``b``'s where it comes."""
    seen: dict[str, int] = {}
    where_b: dict[tuple[str, int], int] = {}
    for j, s in enumerate(b):
        k = seen.get(s.name.lower(), 0)
        seen[s.name.lower()] = k + 1
        where_b[(s.name.lower(), k)] = j
    out: list[tuple[Optional[int], Optional[int]]] = []
    seen, used, next_b = {}, set(), 0
    for i, s in enumerate(a):
        k = seen.get(s.name.lower(), 0)
        seen[s.name.lower()] = k + 1
        j = where_b.get((s.name.lower(), k))
        if j is not None:
            out += [(None, jj) for jj in range(next_b, j) if jj not in used]
            next_b = max(next_b, j + 1)
            used.add(j)
        out.append((i, j))
    out += [(None, jj) for jj in range(next_b, len(b)) if jj not in used]
    return out


def _unified(x: str, y: str, name_a: str, name_b: str, context: int) -> str:
    return "".join(difflib.unified_diff(x.splitlines(keepends=True), y.splitlines(keepends=True),
                                        name_a, name_b, n=context))


def compare(a: Trace, b: Trace, label_a: str = "A", label_b: str = "B", context: int = 3,
            sources: Optional[tuple[str, str]] = None) -> str:
    """Two lowerings side by side, pass by pass: for each pass (paired by name, in ``a``'s order)
    a header line ``=== <pass>: same`` or ``=== <pass>: N lines differ`` and the unified diff of
    the IR after it; passes only one pipeline has are named. ``sources``: the two generated
    sources, diffed last. ``a`` and ``b`` are two kernels, two variants of one kernel (other
    factory arguments or pass configs) or one kernel traced for two targets."""
    out: list[str] = []
    for i, j in _pairs(a, b):
        if i is None or j is None:
            side, step = (label_b, b[j]) if i is None else (label_a, a[i])
            out.append(f"=== {step.name}: only in {side}\n")
            continue
        d = _unified(a[i].ir, b[j].ir, f"{label_a} @ [{i}] {a[i].name}", f"{label_b} @ [{j}] {b[j].name}",
                     context)
        changed = sum(1 for ln in d.splitlines() if ln[:1] in "+-" and ln[:3] not in ("+++", "---"))
        out.append(f"=== {a[i].name}: " + (f"{changed} lines differ\n{d}" if d else "same\n"))
    for tr, label in ((a, label_a), (b, label_b)):
        if tr.error is not None:
            out.append(f"=== {label} stopped: {type(tr.error).__name__}: {tr.error}\n")
    if sources is not None:
        d = _unified(sources[0], sources[1], f"{label_a} source", f"{label_b} source", context)
        changed = sum(1 for ln in d.splitlines() if ln[:1] in "+-" and ln[:3] not in ("+++", "---"))
        out.append("=== generated source: " + (f"{changed} lines differ\n{d}" if d else "same\n"))
    return "".join(out)
