"""The tiled GEMM the sm_90a GEMM tests build (in thread block clusters where asked), its inputs
and the float64 check."""
import ml_dtypes
import numpy as np

import tegula.language as T

DTYPES = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16}


def gemm(M, N, K, bm, bn, bk, stages, threads, dtype="float16", panel=None, cluster_dims=None):
    """C = A @ B in tiles of bm x bn (bk along K), ``T.use_swizzle(panel)`` when given, launched in
    clusters of ``cluster_dims`` blocks (``T.Kernel(..., cluster_dims=)``) when given."""
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads, cluster_dims=cluster_dims) as (bx, by):
            A_s = T.alloc_shared((bm, bk), dtype)
            B_s = T.alloc_shared((bk, bn), dtype)
            C_l = T.alloc_fragment((bm, bn), "float32")
            if panel:
                T.use_swizzle(panel_size=panel)
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * bm, bx * bn])

    return main


def inputs(rng, M, N, K, dtype):
    """Fresh random A (M x K) and B (K x N) of ``dtype``."""
    t = DTYPES[dtype]
    return rng.standard_normal((M, K)).astype(t), rng.standard_normal((K, N)).astype(t)


def check(c, a, b, tol=4e-3):
    """``c`` is ``a @ b`` computed in float64, within relative (Frobenius) error ``tol``."""
    ref = a.astype(np.float64) @ b.astype(np.float64)
    out = np.asarray(c).astype(np.float64)
    assert np.isfinite(out).all()
    assert np.linalg.norm(out - ref) / np.linalg.norm(ref) < tol
