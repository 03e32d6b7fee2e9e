"""fp8 tiles on the interpreter: gemms, copies, casts and arithmetic read one-byte floats through
a table of their codes (``ops.widen``); the results are those of converting element by element,
bit for bit, and agree with float64 to float32's rounding."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import tegula
import tegula.language as T

M, N, K = 64, 32, 64


def fp8_kernel(src: str):
    @T.prim_func
    def k(A: T.Tensor((M, K), src), B: T.Tensor((N, K), src), S: T.Tensor((M,), "float32"),
          C: T.Tensor((M, N), "float32"), H: T.Tensor((M, K), "float16"), R: T.Tensor((M,), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((M, K), src)
            B_s = T.alloc_shared((N, K), src)
            acc = T.alloc_fragment((M, N), "float32")
            a_f = T.alloc_fragment((M, K), src)
            row = T.alloc_fragment((M,), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.clear(acc)
            T.gemm(A_s, B_s, acc, transpose_B=True)
            for i, j in T.Parallel(M, N):
                acc[i, j] = acc[i, j] * S[i]
            T.copy(acc, C)
            T.copy(A_s, a_f)
            T.copy(a_f, H)  # fp8 -> fp16 through float32
            T.reduce_sum(a_f, row, dim=1)
            for i in T.Parallel(M):
                R[i] = row[i] + T.Cast("float32", a_f[i, 0]) * T.Cast("float32", a_f[i, 1])

    return k


@pytest.mark.parametrize("src", ["float8_e4m3", "float8_e5m2"])
def test_fp8_tiles_match_elementwise_conversion(src):
    d = {"float8_e4m3": ml_dtypes.float8_e4m3fn, "float8_e5m2": ml_dtypes.float8_e5m2}[src]
    rng = np.random.default_rng()
    a = (rng.standard_normal((M, K)) * 4).astype(d)
    b = (rng.standard_normal((N, K)) * 4).astype(d)
    s = rng.standard_normal(M).astype(np.float32)
    c, h, r = np.full((M, N), np.nan, np.float32), np.full((M, K), np.nan, np.float16), np.full(M, np.nan, np.float32)
    tegula.compile(fp8_kernel(src), target="cpu")(a, b, s, c, h, r)

    # the same steps with numpy's element-by-element conversions: equal bit for bit
    af, bf = a.astype(np.float32), b.astype(np.float32)
    np.testing.assert_array_equal(c.view(np.uint32), ((af @ bf.T) * s[:, None]).view(np.uint32))
    np.testing.assert_array_equal(h.view(np.uint16), af.astype(np.float16).view(np.uint16))
    prod = af[:, 0] * af[:, 1]
    np.testing.assert_array_equal(r.view(np.uint32), (np.add.reduce(af, axis=1, dtype=np.float32) + prod).view(np.uint32))

    # and float64: products of fp8 values are exact in float32, sums round
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    np.testing.assert_allclose(c, (a64 @ b64.T) * s[:, None], rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(r, a64.sum(axis=1) + a64[:, 0] * a64[:, 1], rtol=1e-5, atol=1e-4)
