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
from tegula.ir.npu import CoreScope, Mma, NpuKernel, SetFlag, WaitFlag
from tegula.ir.stmt import (BufferStore, Fill, For, Gemm, IfThenElse, Kernel, LetStmt, PrimFunc,
                            Stmt, seq)
from tegula.ir.visitor import Mutator, post_order_visit
from tegula.backends.npu.passes.infer_core_scope import infer_kernel

AUTO_SYNC = "auto_sync"  # NpuKernel annotation: InsertSync runs on it whatever the pass configs


def _scopes(k: Kernel) -> dict:
    """buffer -> NPU memory for the shared and fragment buffers of ``k``."""
    uses: dict = {}

    def use(b: Buffer, what: str, node: Any) -> None:
        if b.scope in ("shared", "shared.dyn", "local.fragment"):
            uses.setdefault(b, {}).setdefault(what, node)

    def visit(n: Any) -> None:
        if isinstance(n, Gemm):
            use(n.A.buffer, "l1", n)
            use(n.B.buffer, "l1", n)
            use(n.C.buffer, "l0c", n)
        elif isinstance(n, For) and n.kind == "parallel":
            post_order_visit(n.body, lambda m: use(m.buffer, "ub", n)
                             if isinstance(m, (BufferLoad, BufferStore)) else None)
            post_order_visit(n.body, lambda m: _no_global(m, n))
        elif hasattr(n, "dst") and hasattr(n.dst, "buffer"):
            for r in (getattr(n, "src", None), n.dst):
                if hasattr(r, "buffer"):
                    use(r.buffer, "any", n)
    post_order_visit(k.body, visit)
    out = {}
    for b in k.allocs:
        if b not in uses:
            continue
        kinds = set(uses[b]) - {"any"}
        if len(kinds) > 1 or ("l1" in kinds and "l0c" in kinds):
            node = uses[b].get("ub") or uses[b].get("l0c")
            raise ScopeError(f"'{b.name}' is used by the cube core (T.gemm) and by the vector cores; "
                             "on the NPU that needs a hand-off through global memory",
                             getattr(node, "span", None),
                             hint="write the kernel in the Ascend dialect (T.Scope, workspaces and "
                                  "cross-core flags), see examples/ascend/flash_attention.py")
        out[b] = kinds.pop() if kinds else "ub"
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
    """A 950-dialect kernel: ``alloc_shared`` / ``alloc_fragment`` buffers get NPU memories by use
    (UB unless a ``T.gemm`` needs them), ``T.gemm`` becomes ``T.mma``; InsertSync runs on it
    unless it writes intra-core flags by hand."""
    scopes = _scopes(k)
    bmap = {b: Buffer(b.name, b.shape, b.dtype, scopes[b], span=b.span) for b in scopes}
    body = _Rewrite(bmap).visit(k.body)
    hand: list = []
    post_order_visit(body, lambda n: hand.append(n) if isinstance(n, (SetFlag, WaitFlag)) else None)
    return NpuKernel(k.grid, k.threads, k.block_vars, tuple(bmap.get(b, b) for b in k.allocs), body,
                     {bmap.get(b, b): v for b, v in k.alloc_inits.items()},
                     {**k.annotations, AUTO_SYNC: not hand}, span=k.span, sub_var=k.sub_var)


class _Kernels(Mutator):
    def visit_NpuKernel(self, k: NpuKernel) -> Stmt:
        return remap_a5_kernel(k) if k.annotations.get("dialect") == "a5" else k

    def visit_Kernel(self, k: Kernel) -> Stmt:
        return to_npu_kernel(k)


def assign_npu_scopes(func: PrimFunc) -> PrimFunc:
    """AssignNpuScopes over every developer-level kernel of ``func`` (NPU kernels unchanged)."""
    return func.with_body(_Kernels().visit(func.body))


__all__ = ["assign_npu_scopes", "to_npu_kernel", "AUTO_SYNC", "Fill"]
