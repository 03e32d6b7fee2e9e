"""Interpreter tests on hand-built tile-level IR, against float64 / exact numpy references."""
from __future__ import annotations

from typing import Callable

import numpy as np
import pytest
from interp_ir import ceildiv, func, kernel, region

from tegula.backends.interp import execute
from tegula.errors import OutOfBoundsError, ScopeError, UnsupportedError
from tegula.ir import dtype as dt
from tegula.ir.buffer import Buffer
from tegula.ir.expr import Var, binary, call, cast, const, select
from tegula.ir.span import Span
from tegula.ir.stmt import (Atomic, Break, BufferStore, Continue, Copy, CumSum, Fill, For, Gemm,
                            IfThenElse,
                            LetStmt, Print, Reduce, Stmt, While, seq)

RNG = np.random.default_rng()  # fresh inputs every run


def rand(shape: tuple, dtype: str = "float32", lo: float = -2, hi: float = 2) -> np.ndarray:
    x = RNG.uniform(lo, hi, shape)
    x[x == 0] = 0.5
    return x.astype(dt.as_dtype(dtype).np)


def par2(m: int, n: int, body: Callable) -> Stmt:
    """``for i, j in T.Parallel(m, n): body(i, j)``."""
    i, j = Var("i"), Var("j")
    return For(i, const(0), m, For(j, const(0), n, seq(*body(i, j)), kind="parallel"),
               kind="parallel")


def par1(m: int, body: Callable) -> Stmt:
    i = Var("i")
    return For(i, const(0), m, seq(*body(i)), kind="parallel")


# -- gemm ------------------------------------------------------------------------------------
def gemm_func(M: int, N: int, K: int, bm: int, bn: int, bk: int, dtype: str = "float16",
              acc: str = "float32", trans_a: bool = False, trans_b: bool = False,
              out: str | None = None):
    out = out or dtype
    A = Buffer("A", (K, M) if trans_a else (M, K), dtype)
    B = Buffer("B", (N, K) if trans_b else (K, N), dtype)
    C = Buffer("C", (M, N), out)
    As = Buffer("A_s", (bk, bm) if trans_a else (bm, bk), dtype, "shared")
    Bs = Buffer("B_s", (bn, bk) if trans_b else (bk, bn), dtype, "shared")
    Cl = Buffer("C_l", (bm, bn), acc, "local.fragment")
    k = Var("k")

    def body(bx: Var, by: Var) -> list:
        ra = region(A, (k * bk, bk), (by * bm, bm)) if trans_a else \
            region(A, (by * bm, bm), (k * bk, bk))
        rb = region(B, (bx * bn, bn), (k * bk, bk)) if trans_b else \
            region(B, (k * bk, bk), (bx * bn, bn))
        return [Fill(Cl.region(), const(0, acc)),
                For(k, const(0), ceildiv(K, bk), seq(
                    Copy(ra, As.region()), Copy(rb, Bs.region()),
                    Gemm(As.region(), Bs.region(), Cl.region(), trans_a, trans_b)),
                    kind="pipelined", annotations={"num_stages": 3}),
                Copy(Cl.region(), region(C, (by * bm, bm), (bx * bn, bn)))]
    return func("gemm", (A, B, C), kernel((ceildiv(N, bn), ceildiv(M, bm)), (As, Bs, Cl), body))


@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_gemm_ragged_tails(ta: bool, tb: bool) -> None:
    M, N, K = 200, 130, 70
    f = gemm_func(M, N, K, 64, 64, 32, trans_a=ta, trans_b=tb)
    a = rand((K, M) if ta else (M, K), "float16")
    b = rand((N, K) if tb else (K, N), "float16")
    c = np.full((M, N), np.nan, np.float16)
    execute(f, [a, b, c])
    ref = (a.T if ta else a).astype(np.float64) @ (b.T if tb else b).astype(np.float64)
    np.testing.assert_allclose(c.astype(np.float64), ref, rtol=2e-3, atol=2e-2)


def test_gemm_bfloat16_and_float64_accumulators() -> None:
    f = gemm_func(64, 64, 64, 32, 32, 16, dtype="bfloat16", out="float32")
    a, b = rand((64, 64), "bfloat16"), rand((64, 64), "bfloat16")
    c = np.zeros((64, 64), np.float32)
    execute(f, [a, b, c])
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-5, atol=1e-4)
    f = gemm_func(48, 40, 24, 16, 16, 8, dtype="float64", acc="float64")
    a, b = rand((48, 24), "float64"), rand((24, 40), "float64")
    c = np.zeros((48, 40))
    execute(f, [a, b, c])
    np.testing.assert_allclose(c, a @ b, rtol=1e-12, atol=1e-12)


def test_gemm_int8_int32_accumulator_is_exact() -> None:
    M, N, K = 96, 80, 512
    f = gemm_func(M, N, K, 32, 32, 64, dtype="int8", acc="int32", out="int32")
    a = RNG.integers(-128, 128, (M, K)).astype(np.int8)
    b = RNG.integers(-128, 128, (K, N)).astype(np.int8)
    c = np.zeros((M, N), np.int32)
    execute(f, [a, b, c])
    np.testing.assert_array_equal(c, a.astype(np.int64) @ b.astype(np.int64))


def test_gemm_clear_accum_and_float16_accumulator() -> None:
    A, B = Buffer("A", (32, 16), "float16"), Buffer("B", (16, 32), "float16")
    C = Buffer("C", (32, 32), "float16")
    Cl = Buffer("C_l", (32, 32), "float16", "local.fragment")
    body = lambda bx: [Fill(Cl.region(), const(100.0, "float16")),  # noqa: E731
                       Gemm(A.region(), B.region(), Cl.region(), clear_accum=True),
                       Gemm(A.region(), B.region(), Cl.region()),
                       Copy(Cl.region(), C.region())]
    f = func("g", (A, B, C), kernel((1,), (Cl,), body))
    a, b = rand((32, 16), "float16"), rand((16, 32), "float16")
    c = np.empty((32, 32), np.float16)
    execute(f, [a, b, c])
    p = (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16)
    ref = (p.astype(np.float32) + a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16)
    np.testing.assert_array_equal(c, ref)


def test_gemm_in_a_serial_loop_accumulates() -> None:
    """One T.gemm repeated in a serial loop adds up in its fragment (the timing of this loop is
    ``benchmarks/interp_bench.py``'s "2048 x T.gemm" row, not a test)."""
    A, B = Buffer("A", (128, 32), "float16", "shared"), Buffer("B", (32, 128), "float16", "shared")
    Cl = Buffer("C", (128, 128), "float32", "local.fragment")
    X = Buffer("X", (128, 32), "float16")
    Y = Buffer("Y", (32, 128), "float16")
    Z = Buffer("Z", (128, 128), "float32")
    k = Var("k")
    body = lambda bx: [Copy(X.region(), A.region()), Copy(Y.region(), B.region()),  # noqa: E731
                       Fill(Cl.region(), const(0.0)),
                       For(k, const(0), 64, Gemm(A.region(), B.region(), Cl.region())),
                       Copy(Cl.region(), Z.region())]
    f = func("g", (X, Y, Z), kernel((1,), (A, B, Cl), body))
    x, y, z = rand((128, 32), "float16"), rand((32, 128), "float16"), np.empty((128, 128), np.float32)
    execute(f, [x, y, z])
    np.testing.assert_allclose(z, 64 * (x.astype(np.float64) @ y.astype(np.float64)),
                               rtol=1e-4, atol=0.1)


# -- parallel loops --------------------------------------------------------------------------
def test_parallel_elementwise_with_if_and_ragged_tail() -> None:
    M, N, bm, bn = 100, 70, 32, 32
    A, B, C = Buffer("A", (M, N), "float32"), Buffer("B", (N,), "float32"), Buffer("C", (M, N), "float32")

    def body(bx: Var, by: Var) -> list:
        def inner(i: Var, j: Var) -> list:
            r, c = by * bm + i, bx * bn + j
            inside = (r < M) & (c < N)
            pos = A[r, c] > 0
            return [IfThenElse(inside, IfThenElse(pos, BufferStore(C, (r, c), A[r, c] * B[c] + 1.0),
                                                  BufferStore(C, (r, c), call("exp", A[r, c]))))]
        return [par2(bm, bn, inner)]
    f = func("ew", (A, B, C), kernel((ceildiv(N, bn), ceildiv(M, bm)), (), body))
    a, b = rand((M, N)), rand((N,))
    c = np.full((M, N), np.nan, np.float32)
    execute(f, [a, b, c])
    ref = np.where(a > 0, a * b + 1, np.exp(a.astype(np.float64)))
    np.testing.assert_allclose(c, ref, rtol=1e-6)


def test_parallel_transpose_let_serial_and_select() -> None:
    A, C = Buffer("A", (16, 24), "float32"), Buffer("D", (24, 16), "float32")
    S = Buffer("S", (24, 16), "float32", "shared")
    k, t = Var("k"), Var("t", dt.float32)

    def body(bx: Var) -> list:
        def inner(i: Var, j: Var) -> list:
            acc = LetStmt(t, A[j, i] * 2.0)
            loop = For(k, const(0), 3, BufferStore(S, (i, j), S[i, j] + cast("float32", k)))
            return [acc, BufferStore(S, (i, j), select(t > 0, t, -t)), loop]
        return [par2(24, 16, inner), Copy(S.region(), C.region())]
    f = func("tr", (A, C), kernel((1,), (S,), body))
    a = rand((16, 24))
    d = np.empty((24, 16), np.float32)
    execute(f, [a, d])
    np.testing.assert_allclose(d, np.abs(a.T * 2) + 3, rtol=1e-6)


def test_parallel_gather_and_scalar_store_in_body() -> None:
    A, I, O = Buffer("A", (50,), "float32"), Buffer("I", (20,), "int32"), Buffer("O", (21,), "float32")
    f = func("g", (A, I, O), kernel((1,), (), lambda bx: [
        par1(20, lambda i: [BufferStore(O, (i,), A[I[i]]), BufferStore(O, (const(20),), A[I[i]])])]))
    a, idx = rand((50,)), RNG.integers(0, 50, 20).astype(np.int32)
    o = np.empty(21, np.float32)
    execute(f, [a, idx, o])
    np.testing.assert_array_equal(o[:20], a[idx])
    assert o[20] == a[idx[-1]]  # lanes storing to one element: the last one wins


def test_unwritten_fragment_reads_as_poison() -> None:
    O = Buffer("O", (8,), "float32")
    F = Buffer("F", (8,), "float32", "local.fragment")
    f = func("p", (O,), kernel((1,), (F,), lambda bx: [Copy(F.region(), O.region())]))
    o = np.zeros(8, np.float32)
    execute(f, [o])
    assert np.isnan(o).all()


# -- reductions, cumsum ----------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["sum", "max", "min", "abssum", "absmax"])
@pytest.mark.parametrize("clear", [True, False])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_reduce(kind: str, clear: bool, dim: int) -> None:
    M, N = 24, 40
    src_dtype = "float16"
    X = Buffer("X", (M, N), src_dtype)
    n_out = N if dim == 0 else M
    D0, O = Buffer("D0", (n_out,), "float32"), Buffer("O", (n_out,), "float32")
    S = Buffer("S", (M, N), src_dtype, "shared")
    F = Buffer("F", (M, N), "float32", "local.fragment")
    R = Buffer("R", (n_out,), "float32", "local.fragment")
    body = lambda bx: [Copy(X.region(), S.region()), Copy(S.region(), F.region()),  # noqa: E731
                       Copy(D0.region(), R.region()),
                       Reduce(kind, F.region(), R.region(), dim, clear),
                       Copy(R.region(), O.region())]
    f = func("r", (X, D0, O), kernel((1,), (S, F, R), body))
    x, d0 = rand((M, N), src_dtype), rand((n_out,))
    o = np.empty(n_out, np.float32)
    execute(f, [x, d0, o])
    x64, ax = x.astype(np.float64), dim % 2
    r = {"sum": x64.sum(ax), "max": x64.max(ax), "min": x64.min(ax),
         "abssum": np.abs(x64).sum(ax), "absmax": np.abs(x64).max(ax)}[kind]
    if not clear:
        r = {"sum": r + d0, "abssum": r + d0, "max": np.maximum(r, d0), "min": np.minimum(r, d0),
             "absmax": np.maximum(r, d0)}[kind]
    np.testing.assert_allclose(o, r, rtol=1e-5, atol=1e-5)


def test_reduce_into_dst_with_unit_dim() -> None:
    X, O = Buffer("X", (8, 16), "float32"), Buffer("O", (8, 1), "float32")
    R = Buffer("R", (8, 1), "float32", "local.fragment")
    f = func("r", (X, O), kernel((1,), (R,), lambda bx: [
        Reduce("sum", X.region(), R.region(), 1), Copy(R.region(), O.region())]))
    x, o = rand((8, 16)), np.empty((8, 1), np.float32)
    execute(f, [x, o])
    np.testing.assert_allclose(o[:, 0], x.astype(np.float64).sum(1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("dim", [0, 1])
def test_cumsum(reverse: bool, dim: int) -> None:
    X, O = Buffer("X", (12, 20), "float32"), Buffer("O", (12, 20), "float32")
    S = Buffer("S", (12, 20), "float32", "shared")
    f = func("c", (X, O), kernel((1,), (S,), lambda bx: [
        Copy(X.region(), S.region()), CumSum(S.region(), S.region(), dim, reverse),
        Copy(S.region(), O.region())]))
    x, o = rand((12, 20)), np.empty((12, 20), np.float32)
    execute(f, [x, o])
    x64 = x.astype(np.float64)
    ref = np.flip(np.cumsum(np.flip(x64, dim), dim), dim) if reverse else np.cumsum(x64, dim)
    np.testing.assert_allclose(o, ref, rtol=1e-5, atol=1e-5)


# -- atomics ---------------------------------------------------------------------------------
def test_split_k_atomic_add_and_element_atomics() -> None:
    M, N, K, bm, bn, bk, splits = 64, 48, 128, 32, 16, 32, 4
    A, B = Buffer("A", (M, K), "float16"), Buffer("B", (K, N), "float16")
    C, Mx = Buffer("C", (M, N), "float32"), Buffer("Mx", (N,), "float32")
    Cnt = Buffer("Cnt", (8,), "int32")
    As, Bs = Buffer("As", (bm, bk), "float16", "shared"), Buffer("Bs", (bk, bn), "float16", "shared")
    Cl = Buffer("Cl", (bm, bn), "float32", "local.fragment")
    k = Var("k")
    per = K // splits // bk

    def body(bx: Var, by: Var, bz: Var) -> list:
        kk = bz * per + k
        return [Fill(Cl.region(), const(0.0)),
                For(k, const(0), per, seq(
                    Copy(region(A, (by * bm, bm), (kk * bk, bk)), As.region()),
                    Copy(region(B, (kk * bk, bk), (bx * bn, bn)), Bs.region()),
                    Gemm(As.region(), Bs.region(), Cl.region()))),
                Atomic("add", region(C, (by * bm, bm), (bx * bn, bn)), Cl.region()),
                par2(bm, bn, lambda i, j: [Atomic("max", region(Mx, bx * bn + j), Cl[i, j])]),
                Atomic("add", region(Cnt, 0), const(1)),
                par1(bm, lambda i: [Atomic("add", region(Cnt, 1 + i % 4), const(1))])]
    grid = (N // bn, M // bm, splits)
    f = func("splitk", (A, B, C, Mx, Cnt), kernel(grid, (As, Bs, Cl), body))
    a, b = rand((M, K), "float16"), rand((K, N), "float16")
    c = rand((M, N))
    mx, cnt = np.full(N, -np.inf, np.float32), np.zeros(8, np.int32)
    c0 = c.astype(np.float64)
    execute(f, [a, b, c, mx, cnt])
    np.testing.assert_allclose(c, c0 + a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-4)
    nblocks = grid[0] * grid[1] * grid[2]
    # the block-level element atomic is made by every one of the block's 128 threads
    assert cnt[0] == nblocks * 128 and list(cnt[1:5]) == [nblocks * bm // 4] * 4
    # the per-split partial products' max per column
    parts = [a[:, s * 32:(s + 1) * 32].astype(np.float64) @ b[s * 32:(s + 1) * 32].astype(np.float64)
             for s in range(splits)]
    np.testing.assert_allclose(mx, np.max([p.max(0) for p in parts], 0), rtol=1e-5)


def test_atomic_out_of_bounds_dropped_and_float16_rounding() -> None:
    C = Buffer("C", (10,), "float16")
    V = Buffer("V", (16,), "float16", "shared")
    f = func("a", (C,), kernel((3,), (V,), lambda bx: [
        Fill(V.region(), const(0.1, "float16")),
        Atomic("add", region(C, (bx * 4, 16)), V.region())]))
    c = np.ones(10, np.float16)
    execute(f, [c])
    ref = np.ones(10, np.float16)
    for blk in range(3):
        lo = blk * 4
        ref[lo:] = (ref[lo:].astype(np.float32) + np.float16(0.1)).astype(np.float16)
    np.testing.assert_array_equal(c, ref)


# -- scalar control flow ---------------------------------------------------------------------
def test_let_while_break_continue_and_var_init() -> None:
    X, O = Buffer("X", (64,), "float32"), Buffer("O", (3,), "float32")
    acc = Buffer("acc", (1,), "float32", "local.var")
    n = Buffer("n", (1,), "int32", "local.var")
    i, k, t = Var("i"), Var("k"), Var("t", dt.float32)
    loop = While(n[0] < 64, seq(
        LetStmt(t, X[n[0]]),
        BufferStore(n, (const(0),), n[0] + 1),
        IfThenElse(t < 0, Continue()),
        BufferStore(acc, (const(0),), acc[0] + t),
        IfThenElse(acc[0] > 10.0, Break())))
    count = For(k, const(0), 100, seq(IfThenElse(k >= 7, Break()),
                                      BufferStore(O, (const(2),), O[2] + 1.0)))
    body = lambda bx: [loop, BufferStore(O, (const(0),), acc[0]),  # noqa: E731
                       BufferStore(O, (const(1),), cast("float32", n[0])), count]
    f = func("w", (X, O), kernel((1,), (acc, n), body, inits={acc: 0.5}))
    x = rand((64,))
    o = np.zeros(3, np.float32)
    execute(f, [x, o])
    s, m = np.float32(0.5), 0
    while m < 64:
        v = x[m]
        m += 1
        if v < 0:
            continue
        s = np.float32(s + v)
        if s > 10:
            break
    assert o[0] == s and o[1] == m and o[2] == 7


def test_integer_semantics() -> None:
    X = Buffer("X", (6,), "int32")
    O = Buffer("O", (6, 6), "int32")
    a, b = X[0], X[1]
    exprs = [a / b, a // b, a % b, binary("truncmod", a, b),
             X[2] * X[3], X[4] + X[5]]
    f = func("i", (X, O), kernel((1,), (), lambda bx: [
        BufferStore(O, (const(0), const(r)), e) for r, e in enumerate(exprs)]))
    o = np.zeros((6, 6), np.int32)
    x = np.array([-7, 2, 65536, 65536, 2**31 - 1, 1], np.int32)
    execute(f, [x, o])
    assert list(o[0]) == [-3, -4, 1, -1, 0, -(2**31)]


def test_narrow_float_arithmetic_rounds_each_operation() -> None:
    X, O = Buffer("X", (4,), "bfloat16"), Buffer("O", (2,), "bfloat16")
    e = (X[0] + X[1]) * X[2] - X[3]
    f = func("n", (X, O), kernel((1,), (), lambda bx: [
        BufferStore(O, (const(0),), e), BufferStore(O, (const(1),), call("exp", X[0]))]))
    x = rand((4,), "bfloat16")
    o = np.zeros(2, x.dtype)
    execute(f, [x, o])
    bf, f32 = x.dtype, np.float32
    r = ((x[0].astype(f32) + x[1].astype(f32)).astype(bf).astype(f32) * x[2].astype(f32)).astype(bf)
    r = (r.astype(f32) - x[3].astype(f32)).astype(bf)
    assert o[0] == r and o[1] == np.exp(x[0].astype(f32)).astype(bf)


def test_dynamic_dims_and_scalar_param() -> None:
    m = Var("m")
    X, Y = Buffer("X", (m, 8), "float32"), Buffer("Y", (m, 8), "float32")
    s = Var("s", dt.float32)
    f = func("d", (X, Y, s), kernel(((m + 15) // 16,), (), lambda bx: [
        par2(16, 8, lambda i, j: [IfThenElse(bx * 16 + i < m, BufferStore(
            Y, (bx * 16 + i, j), X[bx * 16 + i, j] * s))])]))
    for rows in (5, 37):
        x, y = rand((rows, 8)), np.zeros((rows, 8), np.float32)
        execute(f, [x, y, 3.0])
        np.testing.assert_allclose(y, x * 3, rtol=1e-6)


def test_print(capsys: pytest.CaptureFixture) -> None:
    X = Buffer("X", (2,), "float32")
    f = func("p", (X,), kernel((2,), (), lambda bx: [Print(X[bx], "val")]))
    execute(f, [np.array([1.5, 2.5], np.float32)])
    out = capsys.readouterr().out
    assert "val" in out and "1.5" in out and "2.5" in out and "(1,)" in out


# -- errors ----------------------------------------------------------------------------------
SPAN = Span(__file__, 1, 0)


def test_out_of_bounds_store_names_buffer_and_span() -> None:
    X = Buffer("Xbuf", (4,), "float32")
    st = BufferStore(X, (const(7),), const(1.0), span=SPAN)
    f = func("o", (X,), kernel((1,), (), lambda bx: [st]))
    with pytest.raises(OutOfBoundsError) as ei:
        execute(f, [np.zeros(4, np.float32)])
    assert "Xbuf" in str(ei.value) and "[7]" in str(ei.value) and ei.value.span is SPAN


def test_out_of_bounds_parallel_load_unmasked_raises() -> None:
    X, Y = Buffer("X", (10,), "float32"), Buffer("Y", (16,), "float32")
    f = func("o", (X, Y), kernel((1,), (), lambda bx: [
        par1(16, lambda i: [BufferStore(Y, (i,), X[i])])]))
    with pytest.raises(OutOfBoundsError):
        execute(f, [rand((10,)), np.zeros(16, np.float32)])


def test_break_in_parallel_is_scope_error() -> None:
    Y = Buffer("Y", (16,), "float32")
    f = func("b", (Y,), kernel((1,), (), lambda bx: [
        par1(16, lambda i: [IfThenElse(i > 3, Break(span=SPAN))])]))
    with pytest.raises(ScopeError) as ei:
        execute(f, [np.zeros(16, np.float32)])
    assert ei.value.span is SPAN


def test_copy_in_parallel_is_scope_error() -> None:
    Y = Buffer("Y", (16,), "float32")
    S = Buffer("S", (16,), "float32", "shared")
    f = func("b", (Y,), kernel((1,), (S,), lambda bx: [
        par1(16, lambda i: [Copy(Y.region(), S.region(), span=SPAN)])]))
    with pytest.raises(ScopeError):
        execute(f, [np.zeros(16, np.float32)])


def test_unimplemented_op_message() -> None:
    class Custom(Stmt):
        pass
    Y = Buffer("Y", (1,), "float32")
    f = func("u", (Y,), kernel((1,), (), lambda bx: [Custom()]))
    with pytest.raises(UnsupportedError, match="unimplemented op Custom for target cpu"):
        execute(f, [np.zeros(1, np.float32)])


def test_lane_varying_serial_loop_and_while_in_parallel() -> None:
    X, O, W = Buffer("X", (16,), "float32"), Buffer("O", (16,), "float32"), Buffer("W", (16,), "int32")
    S = Buffer("S", (16,), "float32", "local.fragment")
    N = Buffer("N", (16,), "int32", "local.fragment")
    k = Var("k")

    def body(bx: Var) -> list:
        tri = par1(16, lambda i: [BufferStore(S, (i,), const(0.0)),
                                  For(k, const(0), i + 1, BufferStore(S, (i,), S[i] + X[k]))])
        # count halvings of 1000 + 97 * i until below 1
        halve = par1(16, lambda i: [BufferStore(N, (i,), const(0)), While(
            binary(
                "shr", cast("int32", 1000) + i * 97, N[i]) > 0,
            BufferStore(N, (i,), N[i] + 1))])
        return [tri, halve, Copy(S.region(), O.region()), Copy(N.region(), W.region())]
    f = func("t", (X, O, W), kernel((1,), (S, N), body))
    x, o, w = rand((16,)), np.empty(16, np.float32), np.empty(16, np.int32)
    execute(f, [x, o, w])
    np.testing.assert_allclose(o, np.cumsum(x.astype(np.float64)), rtol=1e-5, atol=1e-6)
    assert list(w) == [int(1000 + 97 * i).bit_length() for i in range(16)]


def test_argument_dtype_mismatch() -> None:
    from tegula.errors import ArgumentError
    X = Buffer("X", (4,), "float16")
    f = func("a", (X,), kernel((1,), (), lambda bx: [Fill(X.region(), const(1.0))]))
    with pytest.raises(ArgumentError, match="float16"):
        execute(f, [np.zeros(4, np.float32)])
