"""Reading a fragment or local element that was never written is a located UninitializedReadError on
``cpu`` and on the emulators (``cuda-emu``, ``cuda-emu:sm_90a``): a GEMM that forgets ``T.clear``
is named at its ``T.gemm`` line instead of returning NaN. NaNs the kernel computes, and elements
a bounds check drops, are not reports."""
import numpy as np
import pytest

import tegula
import tegula.language as T
from tegula.errors import UninitializedReadError

TARGETS = ["cpu", "cuda-emu"]


def _line(fn, text):
    import inspect

    src, start = inspect.getsourcelines(fn)
    return start + next(i for i, ln in enumerate(src) if text in ln)


def gemm(M, N, K, clear=True, bm=64, bn=64, bk=32):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            C_l = T.alloc_fragment((bm, bn), "float32")
            if clear:
                T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * bm, bx * bn])
    return main


@pytest.mark.parametrize("target", TARGETS + ["cuda-emu:sm_90a"])
def test_gemm_without_clear_is_reported_at_the_gemm(target, rng):
    a = rng.standard_normal((128, 64)).astype(np.float16)
    b = rng.standard_normal((64, 128)).astype(np.float16)
    with pytest.raises(UninitializedReadError) as e:
        tegula.compile(gemm(128, 128, 64, clear=False), out_idx=[-1], target=target)(a, b)
    msg = str(e.value)
    assert "'C_l' that was never written" in msg and "T.clear(C_l)" in msg
    assert f"test_uninitialized_reads.py:{_line(gemm, 'T.gemm(A_s, B_s, C_l)')}" in msg
    c = tegula.compile(gemm(128, 128, 64), out_idx=[-1], target=target)(a, b)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-3, atol=1e-3)


def accumulate(n, init):
    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=32):
            acc = T.alloc_fragment((n,), "float32")
            if init:
                T.fill(acc, 1.0)
            for i in T.Parallel(n):
                acc[i] = acc[i] + X[i]
            T.copy(acc, Y)
    return main


@pytest.mark.parametrize("target", TARGETS)
def test_element_read_of_a_fragment_never_written(target, rng):
    x = rng.standard_normal(64).astype(np.float32)
    with pytest.raises(UninitializedReadError) as e:
        tegula.compile(accumulate(64, False), out_idx=[-1], target=target)(x)
    msg = str(e.value)
    assert "'acc' that was never written" in msg
    # the statement's line (cpu), or its T.Parallel's, which the lowered loop carries (cuda-emu)
    assert any(f"test_uninitialized_reads.py:{_line(accumulate, text)}" in msg
               for text in ("acc[i] = acc[i] + X[i]", "for i in T.Parallel(n)"))
    y = tegula.compile(accumulate(64, True), out_idx=[-1], target=target)(x)
    np.testing.assert_allclose(y, x.astype(np.float64) + 1.0, rtol=1e-6)


def reduce_into(init):
    @T.prim_func
    def main(X: T.Tensor((8, 32), "float32"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=32):
            x = T.alloc_fragment((8, 32), "float32")
            s = T.alloc_fragment((8,), "float32")
            T.copy(X, x)
            if init:
                T.clear(s)
            T.reduce_sum(x, s, dim=1, clear=False)
            T.copy(s, Y)
    return main


@pytest.mark.parametrize("target", TARGETS)
def test_reduce_without_clear_into_a_fresh_fragment(target, rng):
    x = rng.standard_normal((8, 32)).astype(np.float32)
    with pytest.raises(UninitializedReadError, match="'s' that was never written"):
        tegula.compile(reduce_into(False), out_idx=[-1], target=target)(x)
    y = tegula.compile(reduce_into(True), out_idx=[-1], target=target)(x)
    np.testing.assert_allclose(y, x.astype(np.float64).sum(axis=1), rtol=1e-5, atol=1e-5)


def ragged(n, rows=32):
    @T.prim_func
    def main(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, rows), threads=32) as bx:
            t = T.alloc_fragment((rows,), "float32")
            for i in T.Parallel(rows):
                if bx * rows + i < n:   # the rows past the end stay unwritten ...
                    t[i] = T.sqrt(X[bx * rows + i])   # ... and sqrt(-1) is a NaN the kernel made
            T.copy(t, Y[bx * rows])     # ... and are dropped here, unread
            for i in T.Parallel(rows):
                if bx * rows + i < n:
                    Y[bx * rows + i] = Y[bx * rows + i] + t[i] * 0.0
    return main


@pytest.mark.parametrize("target", TARGETS)
def test_dropped_elements_and_computed_nans_are_not_reported(target, rng):
    x = rng.standard_normal(50).astype(np.float32)   # 50 rows: the second block's last 14 unwritten
    y = tegula.compile(ragged(50), out_idx=[-1], target=target)(x)
    with np.errstate(invalid="ignore"):
        want = np.sqrt(x.astype(np.float64)) * 2.0 - np.sqrt(x.astype(np.float64))
    np.testing.assert_allclose(y, want, rtol=1e-5, equal_nan=True)
    assert np.isnan(y).sum() == (x < 0).sum() > 0
