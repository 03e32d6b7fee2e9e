"""What a stretch of the pipeline did to a kernel: a unified diff of the IR between two points.

::

    import tegula.tools as tools
    print(tools.diff(matmul, "input", "PipelineCopies", 1024, 1024, 1024, target="cuda:sm_80"))

A point is a pass name (case-insensitive; the IR right after that pass), ``"input"`` (the tile IR
before any pass) or a position in the trace (0 = input, -1 = the last pass).
"""
from __future__ import annotations

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
