"""Software pipelining of ``T.Pipelined`` loops (multi-buffered shared tiles, cp.async).

Not applied yet: the loop runs as a plain serial loop with synchronous copies.
"""
from __future__ import annotations

from tegula.ir.stmt import PrimFunc


def pipeline_copies(func: PrimFunc) -> PrimFunc:
    return func
