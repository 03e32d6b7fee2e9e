"""Kernels in a module with ``from __future__ import annotations`` (string annotations)."""
from __future__ import annotations

import numpy as np

import tegula as tilelang
import tegula.language as T


def fill_rows(M, N, dtype="float32"):
    shape = (M, N)  # named only in the annotation below: not a closure variable of main

    @T.prim_func
    def main(A: T.Tensor(shape, dtype), n: T.int32):
        with T.Kernel(1) as bx:
            for i in T.serial(n):
                for j in T.Parallel(N):
                    A[i, j] = A[i, j] * 2.0

    return main


def test_string_annotations_see_factory_locals(rng):
    f = fill_rows(6, 8)
    assert f.params[0].shape == (6, 8)
    k = tilelang.compile(f, target="cpu")
    a = rng.standard_normal((6, 8)).astype(np.float32)
    want = a.astype(np.float64).copy()
    want[:4] *= 2
    k(a, 4)
    np.testing.assert_allclose(a, want, rtol=1e-6)
    assert "T.serial(n)" in k.get_kernel_source()  # the dynamic trip count prints plainly
