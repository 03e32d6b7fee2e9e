"""VectorizeLoops: a ``T.vectorized`` loop that copies consecutive elements becomes vector copies.

A ``T.vectorized(n)`` loop of thread-level code whose body only copies elements (``dst[.., b + k]
= src[.., c + k]``, same dtype, buffers in global, shared or register memory) moves ``n``
consecutive elements per buffer: it becomes ``tl::copy_vec`` of 16, 8 or 4 bytes, the widest the
bytes and the provable alignment of ``b`` and ``c`` allow (the innermost dimension of each buffer
a multiple of the vector, so the flat offsets share the alignment; buffers start aligned: tensor
arguments, shared buffers at 128 bytes, register arrays at their size). Left as a loop otherwise
(the loop then unrolls; CUDA does not merge scalar loads of pointers it cannot prove aligned)::

    for k in T.vectorized(8):                      T.evaluate(tl::copy_vec<16>(&a[0], &A[kb * 256 + tk * 8]))
        a[k] = A[kb * 256 + tk * 8 + k]            T.evaluate(tl::copy_vec<16>(&b[0], &B[row, kb * 256 + tk * 8]))
        b[k] = B[row, kb * 256 + tk * 8 + k]

Iterations of a ``T.vectorized`` loop are independent (its contract), so the copies of one
buffer happen as one; a body that reads a buffer it also writes stays a loop.
"""
from __future__ import annotations

from typing import Any, Optional

from tegula.arith.simplify import const_int, simplify
from tegula.ir.expr import BufferLoad, Var
from tegula.ir.stmt import BufferStore, Evaluate, For, PrimFunc, SeqStmt, Stmt, seq
from tegula.ir.visitor import Mutator, collect_vars, substitute
from tegula.backends.cuda.passes.lower_tile_ops.context import addr, call

VECTOR_BYTES = (16, 8, 4)


def _stores(body: Stmt) -> Optional[list[BufferStore]]:
    parts = body.stmts if isinstance(body, SeqStmt) else (body,)
    if not all(isinstance(s, BufferStore) for s in parts):
        return None
    return list(parts)  # type: ignore[arg-type]


def _base(idx: tuple, k: Var) -> Optional[tuple]:
    """The indices at ``k = 0`` when only the last one moves with ``k``, by exactly ``k``."""
    *lead, last = idx
    if any(v is k for i in lead for v in collect_vars(i)):
        return None
    b = simplify(substitute(last, {k: 0}))
    if const_int(simplify(last - b - k)) != 0:
        return None
    return (*lead, b)


def _aligned(buf: Any, base: tuple, elems: int) -> bool:
    if buf.is_fragment or not (buf.is_global or buf.is_shared or buf.is_local):
        return False
    inner = buf.shape[-1]
    if not isinstance(inner, int) or inner % elems:
        return False
    return const_int(simplify(base[-1] % elems)) == 0


def _vectorize(loop: For) -> Optional[Stmt]:
    n = const_int(loop.extent)
    if n is None or const_int(loop.start) != 0:
        return None
    stores = _stores(loop.body)
    if not stores:
        return None
    written = {id(s.buffer) for s in stores}
    if len(written) != len(stores):
        return None
    k = loop.var
    out: list[Stmt] = []
    for s in stores:
        v = s.value
        if not isinstance(v, BufferLoad) or v.buffer.dtype != s.buffer.dtype or id(v.buffer) in written:
            return None
        db, sb = _base(s.indices, k), _base(v.indices, k)
        if db is None or sb is None:
            return None
        eb = s.buffer.dtype.itemsize
        width = next((w for w in VECTOR_BYTES if (n * eb) % w == 0 and w >= eb
                      and _aligned(s.buffer, db, w // eb) and _aligned(v.buffer, sb, w // eb)), None)
        if width is None:
            return None
        per = width // eb
        for c in range(n // per):
            d = (*db[:-1], simplify(db[-1] + c * per))
            src = (*sb[:-1], simplify(sb[-1] + c * per))
            out.append(Evaluate(call("tl::copy_vec", addr(BufferLoad(s.buffer, d)),
                                     addr(BufferLoad(v.buffer, src)), template=(width,)), span=s.span))
    return seq(*out)


def vectorize_loops(func: PrimFunc) -> PrimFunc:
    """Turn every ``T.vectorized`` element-copy loop of ``func`` into vector copies."""

    class M(Mutator):
        def visit_For(self, f: For) -> Any:
            if f.kind == "vectorized":
                vec = _vectorize(f)
                if vec is not None:
                    return vec
            return self.generic_visit(f)

    return M().visit(func)
