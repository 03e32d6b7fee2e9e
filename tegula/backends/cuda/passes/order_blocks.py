"""OrderBlocks (sm_90a): a kernel whose pipelined loop runs longer for larger ``blockIdx.x`` (causal
attention: query block ``bx`` visits ``bx + 1`` key blocks) numbers its blocks the other way
round, so that the GPU, which starts blocks in index order, starts the longest first and the grid
ends on short blocks instead of a tail of long ones. Blocks are independent, so nothing changes in
meaning. ``tegula.disable_block_order`` removes the pass.

Before/after (grid 32 along x)::

    with T.Kernel(32, 16, 4) as (bx, by, bz):      with T.Kernel(32, 16, 4) as (bx, by, bz):
        q0 = bx * 128                                  q0 = (31 - bx) * 128
        for kb in T.Pipelined(T.min(32, bx + 1)):      for kb in T.Pipelined(T.min(32, 31 - bx + 1)):
"""
from __future__ import annotations

import dataclasses
from typing import Optional

from tegula.ir.annotations import SWIZZLE
from tegula.arith.simplify import const_int, simplify
from tegula.ir import expr as E
from tegula.ir.stmt import For, Kernel, LetStmt, PrimFunc, SeqStmt
from tegula.ir.visitor import Mutator, post_order_visit, substitute
from tegula.backends.cuda.analysis.pipelined_loop import let_values


def _longer_last(k: Kernel) -> bool:
    """The kernel's pipelined loop has a static trip count at every ``bx``, larger at the last
    ``bx`` than at the first."""
    gx = const_int(E.as_expr(k.grid[0])) if k.grid else None
    if gx is None or gx < 2 or not k.block_vars or SWIZZLE.get(k.annotations):
        return False
    bx = k.block_vars[0]
    body = list(k.body.stmts) if isinstance(k.body, SeqStmt) else [k.body]
    lets = let_values([s for s in body if isinstance(s, LetStmt)])
    loops = [substitute(E.as_expr(s.extent), lets) for s in body if isinstance(s, For) and s.kind == "pipelined"]
    inner: list = []
    post_order_visit(k.body, lambda n: inner.append(n) if isinstance(n, For) and n.kind == "pipelined" else None)
    if len(loops) != 1 or len(inner) != 1:
        return False
    first = const_int(simplify(substitute(loops[0], {bx: 0})))
    last = const_int(simplify(substitute(loops[0], {bx: gx - 1})))
    return first is not None and last is not None and last > first


def order_blocks(func: PrimFunc) -> PrimFunc:
    """Reverse ``blockIdx.x`` in every kernel whose pipelined loop grows with it."""

    class M(Mutator):
        def visit_Kernel(self, k: Kernel) -> Kernel:
            if not _longer_last(k):
                return k
            bx = k.block_vars[0]
            gx: Optional[int] = const_int(E.as_expr(k.grid[0]))
            body = substitute(k.body, {bx: E.const(gx - 1) - bx})  # type: ignore[operator]
            return dataclasses.replace(k, body=body, annotations={**k.annotations, "blocks_reversed": True})

    return M().visit(func)
