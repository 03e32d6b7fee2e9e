"""Fragments that only ``T.Parallel`` nests touch, each indexing them by the nest's own loop variables,
hold as many elements as those loops run.

TileLang gives such a fragment the nest's own layout (ParallelOp's ``IsCommonAccessIndice``), so its
registers cover the loops' extents whatever shape it was allocated with. Programs rely on it: a
``[heads]`` fragment filled by ``for i in T.Parallel(block_M): sinks[i] = ...`` and read the same way
holds ``block_M`` values. tegula widens the fragment's shape when the kernel is built, so every target
means the same::

    sinks = T.alloc_fragment([1], "float16")           sinks = T.alloc_fragment([64], "float16")
    for i in T.Parallel(64):                    ->     for i in T.Parallel(64):
        sinks[i] = Sinks[by]                               sinks[i] = Sinks[by]

A fragment used any other way (a tile operation, an index that is not exactly the loop variables,
an access outside ``T.Parallel``, a user layout) keeps its shape, and an index outside it stays an
``OutOfBoundsError``.
"""
from __future__ import annotations

from typing import Any, Optional

from tegula.ir.buffer import Buffer
from tegula.ir.expr import BufferLoad, Const, Var
from tegula.ir.stmt import BufferStore, For, Kernel
from tegula.ir.visitor import Mutator, Visitor


def _nest(loop: For) -> tuple[Optional[tuple], Any]:
    """(loop variables, extents) of the perfect nest of parallel loops at ``loop`` and its body;
    variables None when a loop of it does not start at 0 or has no constant extent."""
    vars_: list = []
    exts: list = []
    ok = True
    node: Any = loop
    while isinstance(node, For) and node.kind == "parallel":
        ok = ok and isinstance(node.extent, int) and isinstance(node.start, Const) and node.start.value == 0
        vars_.append(node.var)
        exts.append(node.extent)
        node = node.body
    return ((tuple(vars_), tuple(exts)) if ok else None), node


class _Uses(Visitor):
    def __init__(self, frags: set):
        self.frags = frags
        self.nest: Optional[tuple] = None  # (vars, extents) of the enclosing parallel nest
        self.in_parallel = False
        self.extents: dict[Buffer, list] = {}
        self.other: set = set()

    def visit_For(self, s: For) -> None:
        if s.kind != "parallel" or self.in_parallel:
            saved = self.nest
            if s.kind == "parallel":
                self.nest = None  # a parallel loop inside a nest's body: not the nest's own index
            self.generic_visit(s)
            self.nest = saved
            return
        nest, body = _nest(s)
        self.nest, self.in_parallel = nest, True
        self.visit(body)
        self.nest, self.in_parallel = None, False

    def _access(self, buf: Buffer, indices: tuple) -> None:
        if buf not in self.frags:
            return
        n = self.nest
        if n is None or len(indices) != len(n[0]) or \
                not all(isinstance(i, Var) and i is v for i, v in zip(indices, n[0])):
            self.other.add(buf)
            return
        seen = self.extents.setdefault(buf, list(n[1]))
        for d, e in enumerate(n[1]):
            seen[d] = max(seen[d], e)

    def visit_BufferLoad(self, e: BufferLoad) -> None:
        self._access(e.buffer, e.indices)
        for i in e.indices:
            self.visit(i)

    def visit_BufferStore(self, s: BufferStore) -> None:
        self._access(s.buffer, s.indices)
        for i in s.indices:
            self.visit(i)
        self.visit(s.value)

    def visit_Buffer(self, buf: Buffer) -> None:
        if buf in self.frags:
            self.other.add(buf)  # a tile operation's region, or any other use
        super().visit_Buffer(buf)


def widen_loop_fragments(kernel: Kernel) -> Kernel:
    """``kernel`` with the fragments described above widened to their loops' extents."""
    annotated = set((kernel.annotations.get("layout_map") or {}).keys())
    frags = {b for b in kernel.allocs if b.is_fragment and b not in annotated
             and all(isinstance(d, int) for d in b.shape)}
    if not frags:
        return kernel
    uses = _Uses(frags)
    uses.visit(kernel.body)
    remap: dict[Buffer, Buffer] = {}
    for buf, exts in uses.extents.items():
        if buf in uses.other:
            continue
        shape = tuple(max(d, e) for d, e in zip(buf.shape, exts))
        if shape != buf.shape:
            remap[buf] = Buffer(buf.name, shape, buf.dtype, buf.scope, span=buf.span)
    return Mutator(remap).visit(kernel) if remap else kernel
