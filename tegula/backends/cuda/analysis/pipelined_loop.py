"""The parts of a ``T.Pipelined`` loop, shared by the pipelining passes (PipelineCopies, TmaPipeline,
WarpSpecialize): which copies produce its tiles, the tiles given stages, the loop rewritten in place.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from tegula.ir.annotations import LAYOUT_MAP
from tegula.ir import expr as E
from tegula.ir.buffer import Buffer, BufferRegion
from tegula.ir.effects import effects
from tegula.ir.expr import BufferLoad, Var
from tegula.ir.stmt import BufferStore, Copy, For, Kernel, LetStmt, PrimFunc, SeqStmt, Stmt, seq
from tegula.ir.visitor import Mutator, Visitor, collect_vars, substitute


def serial_annotations(loop: For) -> dict:
    """``loop``'s annotations without ``T.Pipelined``'s schedule (stages, order, stage, group):
    those of the serial loop a pipelining pass leaves in its place."""
    return {a: v for a, v in loop.annotations.items() if a not in ("num_stages", "order", "stage", "group")}


def let_values(lets: list) -> dict:
    """The value of each of ``lets`` (LetStmts in order) in terms of what is bound before them."""
    vals: dict = {}
    for s in lets:
        vals[s.var] = substitute(s.value, vals)
    return vals


def _defined_in(body: Stmt) -> set:
    out: set = set()

    class V(Visitor):
        def visit_def(s, node: Any) -> None:
            if isinstance(node, Var):
                out.add(node)

    V().visit(body)
    return out


def written_buffers(s: Any) -> list:
    """The buffers ``s`` stores to or a tile op in it writes (as its effects declare), in order."""
    out: list = []

    class V(Visitor):
        def visit_BufferStore(v, n: Any) -> None:
            out.append(n.buffer)
            v.generic_visit(n)

        def visit_TileOp(v, n: Any) -> None:
            out.extend(effects(n).written_buffers)   # its declared writes (ir/effects.py)
            v.generic_visit(n)

    V().visit(s)
    return out


def used_buffers(s: Any) -> set:
    """Every buffer ``s`` mentions."""
    out: set = set()

    class V(Visitor):
        def visit_Buffer(v, b: Buffer) -> None:
            out.add(b)

    V().visit(s)
    return out


class Restage(Mutator):
    """Point every use of a pipelined tile at its stage ``stage``."""

    def __init__(self, bufs: dict, stage: E.Expr):
        super().__init__()
        self.bufs, self.stage = bufs, stage

    def visit_BufferRegion(self, r: BufferRegion) -> Any:
        nb = self.bufs.get(r.buffer)
        ranges = tuple((self.visit(s), e if isinstance(e, int) else self.visit(e)) for s, e in r.ranges)
        if nb is None:
            return BufferRegion(r.buffer, ranges, span=r.span)
        return BufferRegion(nb, ((self.stage, 1),) + ranges, span=r.span)

    def visit_BufferLoad(self, n: BufferLoad) -> Any:
        idx = tuple(self.visit(i) for i in n.indices)
        nb = self.bufs.get(n.buffer)
        if nb is None:
            return BufferLoad(n.buffer, idx, span=n.span)
        return BufferLoad(nb, (self.stage,) + idx, span=n.span)

    def visit_BufferStore(self, n: Any) -> Any:

        idx = tuple(self.visit(i) for i in n.indices)
        v = self.visit(n.value)
        nb = self.bufs.get(n.buffer)
        if nb is None:
            return BufferStore(n.buffer, idx, v, span=n.span)
        return BufferStore(nb, (self.stage,) + idx, v, span=n.span)


def split_producers(loop: For, others: list[Stmt]) -> Optional[tuple[list[Copy], list[Stmt]]]:
    """The producer copies of a pipelined loop (their sources in terms of the loop variable) and
    the rest of its body, or None when the loop has no producer or its tiles do not qualify
    (``others``: the statements after the loop, which must not read the tiles)."""
    body = list(loop.body.stmts) if isinstance(loop.body, SeqStmt) else [loop.body]
    inner_defs = _defined_in(loop.body)
    producers, consumers = [], []
    lets: dict = {}  # values of the loop body's lets so far, in terms of the loop variable
    for s in body:
        if isinstance(s, LetStmt):
            lets[s.var] = substitute(s.value, lets)
        if isinstance(s, Copy) and s.src.buffer.is_global and s.dst.buffer.is_shared \
                and "tma_user" not in s.annotations:  # T.tma_copy: on the user's barriers
            src = substitute(s.src, lets)
            if not (set(collect_vars(src)) & inner_defs):
                producers.append(Copy(src, s.dst, dict(s.annotations), span=s.span))
                continue
        consumers.append(s)
    if not producers:
        return None
    tiles = [p.dst.buffer for p in producers]
    written_elsewhere = set(written_buffers(seq(*consumers)))
    used_after = used_buffers(seq(*others)) if others else set()
    if len(set(tiles)) != len(tiles) or any(t in written_elsewhere or t in used_after for t in tiles):
        return None
    return producers, consumers


@dataclass(frozen=True)
class PipelineParts:
    """A ``T.Pipelined`` loop that can be pipelined: its ``stages``, its ``producers`` (global ->
    shared copies, sources in terms of the loop variable) and the rest of its body
    (``consumers``)."""

    stages: int
    producers: list
    consumers: list


def pipeline_parts(loop: For, others: list[Stmt]) -> Optional[PipelineParts]:
    """The parts of a ``T.Pipelined`` loop that can be pipelined, else None."""
    S = int(loop.annotations.get("num_stages", 0) or 0)
    if S < 2 or loop.step != 1:
        return None
    split = split_producers(loop, others)
    return None if split is None else PipelineParts(S, *split)


def staged_tiles(producers: list[Copy], S: int, new_allocs: dict) -> dict:
    """Tile -> its buffer of ``S`` stages (made once per tile, kept in ``new_allocs``)."""
    for p in producers:
        t = p.dst.buffer
        if t not in new_allocs:
            new_allocs[t] = Buffer(t.name, (S,) + tuple(t.shape), t.dtype, t.scope, span=t.span)
    return {p.dst.buffer: new_allocs[p.dst.buffer] for p in producers}


def restaged_annotations(ann: dict, new_allocs: dict) -> dict:
    """``ann`` with the layouts ``T.annotate_layout`` gave to tiles that now have pipeline stages
    moved to their staged buffers (stage after stage, each laid out as the tile was)."""
    ann = dict(ann)
    for key in (LAYOUT_MAP.name, "layout_spans"):
        old = ann.get(key)
        if not old:
            continue
        new = {}
        for b, v in old.items():
            nb = new_allocs.get(b)
            if isinstance(nb, Buffer) and nb.ndim == b.ndim + 1 and key == LAYOUT_MAP.name:
                v = v.staged(int(nb.shape[0])) if hasattr(v, "staged") else None
            if v is not None:
                new[nb if isinstance(nb, Buffer) else b] = v
        ann[key] = new
    return ann


def rewrite_pipelined_loops(func: PrimFunc, rewrite: Any, with_kernel: bool = False) -> PrimFunc:
    """Replace every ``T.Pipelined`` loop for which ``rewrite(loop, after, new_allocs)`` returns
    a statement (``after``: what runs after the loop; ``new_allocs``: tile -> its staged buffer,
    filled by ``rewrite``, with extra allocations under keys of their own; ``with_kernel``: the
    enclosing ``Kernel`` is a fourth argument)."""

    class M(Mutator):
        def visit_Kernel(self, kern: Kernel) -> Kernel:
            new_allocs: dict = {}

            def walk(s: Stmt, after: list[Stmt]) -> Stmt:
                if isinstance(s, SeqStmt):
                    out = []
                    items = list(s.stmts)
                    for i, x in enumerate(items):
                        out.append(walk(x, items[:i] + items[i + 1:] + after))
                    return seq(*out)
                if isinstance(s, For) and s.kind == "pipelined":
                    got = rewrite(s, after, new_allocs, kern) if with_kernel else rewrite(s, after, new_allocs)
                    if got is not None:
                        return got
                    return For(s.var, s.start, s.extent, walk(s.body, after), s.kind, s.step,
                               dict(s.annotations), span=s.span)
                if isinstance(s, For):
                    return For(s.var, s.start, s.extent, walk(s.body, [s.body] + after), s.kind, s.step,
                               dict(s.annotations), span=s.span)
                return s

            body = walk(kern.body, [])
            if not new_allocs:
                return kern
            allocs = tuple(new_allocs.get(b, b) for b in kern.allocs)
            allocs += tuple(b for k, b in new_allocs.items() if k not in kern.allocs)
            return Kernel(kern.grid, kern.threads, kern.block_vars, allocs, body, dict(kern.alloc_inits),
                          restaged_annotations(kern.annotations, new_allocs),
                          thread_var=kern.thread_var, span=kern.span)

    return M().visit(func)

