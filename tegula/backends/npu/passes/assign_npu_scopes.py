"""AssignNpuScopes: a developer-level kernel (``T.Kernel(gx, gy, threads=...)`` with
``alloc_shared`` / ``alloc_fragment``, ``T.copy``, ``T.gemm``, ``T.Parallel``, reductions)
becomes an NPU kernel, so one source runs on the GPU and the NPU.

- the grid is flattened into the core-group index ``cid``; the block indices become lets
  (``bx = cid % gx``, ``by = cid // gx % gy``, ...);
- buffers get NPU memories by use: ``T.gemm`` operands A and B live in L1, its accumulator in
  L0C, every other shared or fragment buffer in UB; a buffer both the cube and the vectors use
  is an error (that needs a hand-off through GM, which only the NPU dialects express);
- ``T.gemm`` becomes ``T.mma`` on the L1 operands (``clear_accum`` -> ``init``);
- vector code (copies to and from UB, reductions, ``T.Parallel`` loops over UB buffers) runs on
  the first vector core of the group (``vid == 0``); the second one idles;
- the kernel is marked for InsertSync, since it has no flags of its own.

Before::

    with T.Kernel(4, 2, threads=128) as (bx, by):
        A_s = T.alloc_shared((64, 32), "float16")
        C_f = T.alloc_fragment((64, 64), "float32")
        T.clear(C_f)
        T.gemm(A_s, B_s, C_f)

After::

    with T.Kernel(8, is_npu=True) as (cid, vid):
        A_s = T.alloc_L1((64, 32), "float16")
        C_f = T.alloc_L0C((64, 64), "float32")
        bx = cid % 4
        by = cid // 4 % 2
        T.fill(C_f, 0)
        T.mma(A_s, B_s, C_f)
"""
from __future__ import annotations

from typing import Any

from tegula.errors import ScopeError, UnsupportedError
from tegula.ir.buffer import Buffer
from tegula.ir.expr import BufferLoad, Expr, Var
from tegula.ir.npu import CoreScope, Mma, NpuKernel, SetFlag, VecOp, WaitFlag
from tegula.ir.stmt import (BufferStore, Copy, Fill, For, Gemm, IfThenElse, Kernel, LetStmt, PrimFunc,
                            Stmt, seq)
from tegula.ir.visitor import Mutator, post_order_visit
from tegula.backends.npu.passes.infer_core_scope import infer_kernel

AUTO_SYNC = "auto_sync"  # NpuKernel annotation: InsertSync runs on it whatever the pass configs


_UNASSIGNED = ("shared", "shared.dyn", "local.fragment")
_MEMORY_NAME = {"l1": "L1", "l0a": "L0A", "l0b": "L0B", "l0c": "L0C", "ub": "UB"}
# a buffer that only copies touch takes its memory from what it is copied to or from
_THROUGH_COPY = {"l0a": "l1", "l0b": "l1", "ub": "ub"}


def _line(span: Any) -> str:
    return f"line {span.line}" if span is not None else "an unknown line"


def _scopes(k: Any, developer: bool = True) -> dict:
    """buffer -> NPU memory for the shared and fragment buffers of ``k``: from the uses the
    frontend recorded (``T.tile.*``, ``T.gemm_v0``, ``T.mma``: the kernel annotation
    ``npu_scope_uses``), ``T.gemm`` (A, B: L1; C: L0C), ``T.Parallel`` loops and vector ops (UB),
    then, for buffers only copies touch, the memory of the tile they are copied to or from (an L0A
    / L0B tile: L1), else UB. A buffer claimed for two memories is a ScopeError naming both uses."""
    from tegula.language.ascend import SCOPE_USES

    uses: dict = {}  # buffer -> {memory: (what, span)}

    def use(b: Buffer, what: str, name: str, span: Any) -> None:
        if b.scope in _UNASSIGNED:
            uses.setdefault(b, {}).setdefault(what, (name, span))

    for b, claims in k.annotations.get(SCOPE_USES, {}).items():
        for scope, name, span in claims:
            use(b, scope, name, span)
    copies: list = []

    def visit(n: Any) -> None:
        if isinstance(n, Gemm):
            use(n.A.buffer, "l1", "T.gemm", n.span)
            use(n.B.buffer, "l1", "T.gemm", n.span)
            use(n.C.buffer, "l0c", "T.gemm", n.span)
        elif isinstance(n, VecOp):
            for r in (n.dst,) + tuple(x for x in n.srcs if hasattr(x, "buffer")):
                use(r.buffer, "ub", f"T.tile.{n.op}", n.span)
        elif isinstance(n, For) and n.kind == "parallel":
            post_order_visit(n.body, lambda m: use(m.buffer, "ub", "a T.Parallel loop", n.span)
                             if isinstance(m, (BufferLoad, BufferStore)) else None)
            if developer:
                post_order_visit(n.body, lambda m: _no_global(m, n))
        elif isinstance(n, Copy):
            copies.append(n)
            for r in (n.src, n.dst):
                use(r.buffer, "any", "T.copy", n.span)
        elif hasattr(n, "dst") and hasattr(n.dst, "buffer"):
            for r in (getattr(n, "src", None), n.dst):
                if hasattr(r, "buffer"):
                    use(r.buffer, "any", type(n).__name__, getattr(n, "span", None))
    post_order_visit(k.body, visit)
    out = {}
    for b in k.allocs:
        if b not in uses:
            continue
        kinds = [m for m in uses[b] if m != "any"]
        if len(kinds) > 1:
            (m1, (w1, s1)), (m2, (w2, s2)) = [(m, uses[b][m]) for m in kinds[:2]]
            cube = {"l1", "l0a", "l0b", "l0c"}
            both = (m1 in cube) != (m2 in cube)
            raise ScopeError(f"'{b.name}' is used as {_MEMORY_NAME[m1]} by {w1} ({_line(s1)}) and as "
                             f"{_MEMORY_NAME[m2]} by {w2} ({_line(s2)}); a tile lives in one memory",
                             s2 or s1,
                             hint="the cube and the vector cores share data only through global memory "
                                  "(a workspace and cross-core flags)" if both else
                                  "give each use a tile of its own and T.copy between them")
        if kinds:
            out[b] = kinds[0]
    # buffers only copies touch: the memory of the tile at the other end
    for _ in range(2):
        for c in copies:
            for mine, other in ((c.src.buffer, c.dst.buffer), (c.dst.buffer, c.src.buffer)):
                if mine in uses and mine not in out:
                    there = out.get(other, other.scope)
                    if there in _THROUGH_COPY:
                        out[mine] = _THROUGH_COPY[there]
    for b in k.allocs:
        if b in uses and b not in out:
            out[b] = "ub"
    return out


def _no_global(m: Any, loop: Any) -> None:
    if isinstance(m, (BufferLoad, BufferStore)) and m.buffer.scope == "global":
        raise UnsupportedError(f"a T.Parallel loop reads or writes global buffer '{m.buffer.name}' "
                               "directly; on the NPU only copies move data to and from GM",
                               loop.span, hint="T.copy the tile into a fragment first")


class _Rewrite(Mutator):
    def visit_Gemm(self, s: Gemm) -> Stmt:
        g = self.generic_visit(s)
        init = s.clear_accum if isinstance(s.clear_accum, Expr) else bool(s.clear_accum)
        return Mma(g.A, g.B, g.C, s.transpose_A, s.transpose_B, init, span=s.span)


def _first_vector_core(s: Stmt, vid: Var) -> Stmt:
    class _Only(Mutator):
        def visit_CoreScope(self, c: CoreScope) -> Stmt:
            if c.kind != "V":
                return c
            return CoreScope("V", IfThenElse(vid == 0, c.body, span=c.span), span=c.span)
    return _Only().visit(s)


def to_npu_kernel(k: Kernel) -> NpuKernel:
    """The NPU kernel for developer-level kernel ``k`` (see the module docstring)."""
    scopes = _scopes(k)
    bmap = {b: Buffer(b.name, b.shape, b.dtype, scopes[b], span=b.span) for b in scopes}
    body = _Rewrite(bmap).visit(k.body)
    allocs = tuple(bmap.get(b, b) for b in k.allocs)
    inits = {bmap.get(b, b): v for b, v in k.alloc_inits.items()}
    cid, vid = Var("cid"), Var("vid")
    n: Any = 1
    for g in k.grid:
        n = n * g
    lets, stride = [], None
    for bv, g in zip(k.block_vars, k.grid):
        idx = cid if stride is None else cid // stride
        lets.append(LetStmt(bv, idx % g if len(k.grid) > 1 else idx, span=k.span))
        stride = g if stride is None else stride * g
    ann = {key: v for key, v in k.annotations.items() if key not in ("swizzle", "swizzle_disabled", "layout_map")}
    npu = NpuKernel((n,), (1,), (cid,), allocs, seq(lets, body), inits,
                    {"dialect": "tile", AUTO_SYNC: True, **ann}, span=k.span, sub_var=vid)
    npu = infer_kernel(npu)
    return NpuKernel(npu.grid, npu.threads, npu.block_vars, npu.allocs,
                     _first_vector_core(npu.body, vid), npu.alloc_inits, npu.annotations,
                     span=npu.span, sub_var=vid)


def remap_a5_kernel(k: NpuKernel) -> NpuKernel:
    """An NPU-dialect kernel (950, or A2/A3 in developer mode): ``alloc_shared`` /
    ``alloc_fragment`` buffers get NPU memories by use (:func:`_scopes`), ``T.gemm`` becomes
    ``T.mma``; InsertSync runs on it unless it writes intra-core flags by hand."""
    from tegula.language.ascend import SCOPE_USES

    scopes = _scopes(k, developer=False)
    bmap = {b: Buffer(b.name, b.shape, b.dtype, scopes[b], span=b.span) for b in scopes}
    body = _Rewrite(bmap).visit(k.body)
    hand: list = []
    post_order_visit(body, lambda n: hand.append(n) if isinstance(n, (SetFlag, WaitFlag)) else None)
    return NpuKernel(k.grid, k.threads, k.block_vars, tuple(bmap.get(b, b) for b in k.allocs), body,
                     {bmap.get(b, b): v for b, v in k.alloc_inits.items()},
                     {**{n: v for n, v in k.annotations.items() if n != SCOPE_USES},
                      AUTO_SYNC: not hand or bool(k.annotations.get(AUTO_SYNC))},
                     span=k.span, sub_var=k.sub_var)


class _Kernels(Mutator):
    def visit_NpuKernel(self, k: NpuKernel) -> Stmt:
        if k.annotations.get("dialect") == "a5" or any(b.scope in _UNASSIGNED for b in k.allocs):
            return remap_a5_kernel(k)
        return k

    def visit_Kernel(self, k: Kernel) -> Stmt:
        return to_npu_kernel(k)


def assign_npu_scopes(func: PrimFunc) -> PrimFunc:
    """AssignNpuScopes over every developer-level kernel of ``func`` (NPU kernels unchanged)."""
    return func.with_body(_Kernels().visit(func.body))


__all__ = ["assign_npu_scopes", "to_npu_kernel", "AUTO_SYNC", "Fill"]
