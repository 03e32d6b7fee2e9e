"""Hand-built IR used by the IR tests (no frontend involved)."""
from tegula.ir import expr as E
from tegula.ir.buffer import Buffer
from tegula.ir.expr import Var, const
from tegula.ir.stmt import (Atomic, BufferStore, Copy, CumSum, Fill, For, Gemm, IfThenElse, Kernel,
                            LetStmt, Print, PrimFunc, Reduce, seq)


def gemm_func(block_k: int = 32, stages: int = 3, m_name: str = "m", loop_name: str = "k") -> PrimFunc:
    """The T-script example of the printer docs: a relu(A @ B^T) kernel with a dynamic M."""
    m = Var(m_name)
    A = Buffer("A", (m, 512), "float16")
    B = Buffer("B", (1024, 512), "float16")
    C = Buffer("C", (m, 1024), "float32")
    n = Var("n")
    bx, by = Var("bx"), Var("by")
    As = Buffer("A_shared", (128, block_k), "float16", "shared.dyn")
    Bs = Buffer("B_shared", (128, block_k), "float16", "shared.dyn")
    Cl = Buffer("C_local", (128, 128), "float32", "local.fragment")
    cnt = Buffer("cnt", (1,), "int32", "local.var")
    k, i, j = Var(loop_name), Var("i"), Var("j")
    body = seq(
        Fill(Cl.region(), const(0.0)),
        For(k, const(0), 512 // block_k, seq(
            Copy(A[by * 128:by * 128 + 128, k * block_k:k * block_k + block_k], As.region()),
            Copy(B[bx * 128:bx * 128 + 128, k * block_k:k * block_k + block_k], Bs.region()),
            Gemm(As.region(), Bs.region(), Cl.region(), transpose_B=True),
        ), kind="pipelined", annotations={"num_stages": stages}),
        For(i, const(0), 128, For(j, const(0), 128,
                                  BufferStore(Cl, (i, j), E.maximum(Cl[i, j], 0.0)), kind="parallel"),
            kind="parallel"),
        BufferStore(cnt, (const(0),), cnt + n),
        Copy(Cl.region(), C[by * 128:by * 128 + 128, bx * 128:bx * 128 + 128]),
    )
    kern = Kernel((8, (m + 127) // 128), (128,), (bx, by), (As, Bs, Cl, cnt), body,
                  alloc_inits={cnt: const(0)}, annotations={"swizzle": (10, "row")})
    return PrimFunc("main", (A, B, C, n), kern)


def misc_func() -> PrimFunc:
    """Loops of every kind, lets, conditionals and the remaining tile operations."""
    X = Buffer("X", (64, 64), "float32")
    Y = Buffer("Y", (64,), "float32")
    bx = Var("bx")
    S = Buffer("S", (64, 64), "float32", "shared")
    R = Buffer("R", (64,), "float32", "local.fragment")
    L = Buffer("L", (4,), "float16", "local")
    i, j, t, u, v = Var("i"), Var("j"), Var("t"), Var("u"), Var("v")
    i2 = Var("i")  # a second variable called i, nested inside the first
    x = Var("x")
    body = seq(
        Copy(X.region(), S.region()),
        Reduce("max", S.region(), R.region(), dim=1, clear=False),
        CumSum(S.region(), S.region(), dim=0, reverse=True),
        For(i, const(2), 10, seq(
            LetStmt(x, i * 4 + 1),
            For(i2, const(0), 4, BufferStore(L, (i2,), E.cast("float16", S[x, i2])), kind="unroll"),
        ), step=2),
        For(t, const(0), 4, BufferStore(L, (t,), E.const(1.5, "float16")), kind="vectorized"),
        IfThenElse(bx < 2, Atomic("add", Y[bx:bx + 1], R[0]),
                   IfThenElse(bx == 3, Print(R.region(), "r"), Atomic("max", Y.region(), R.region()))),
        For(u, const(0), 64, For(v, const(0), 2, Fill(S[u, v * 32:v * 32 + 32], const(0.0)),
                                 kind="parallel"), kind="serial"),
        Gemm(S.region(), S.region(), S.region(), transpose_A=True, policy="FullRow", clear_accum=True),
    )
    kern = Kernel((16,), (128,), (bx,), (S, R, L), body)
    return PrimFunc("misc", (X, Y), kern)
