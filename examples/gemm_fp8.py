"""FP8 GEMM, ``C = epilogue(A @ B^T)``, with TileLang's periodic promotion and fused epilogues.

A (M, K) and B (N, K) are fp8 (``float8_e4m3`` or ``float8_e5m2``), both K-major as Hopper's fp8
``wgmma`` reads them; products accumulate in float32. Two things people write around it:

- **periodic promotion** (TileLang's "2xAcc"): the tensor cores accumulate fp8 products with fewer
  bits than float32, so long K loses precision. The kernel accumulates ``promote`` k-tiles into
  ``C_local``, adds that into a second float32 fragment ``C_accum`` and clears ``C_local`` again
  (``promote=0``: one accumulator). One promotion per 128 elements of K is the usual choice.
- **epilogues** on the accumulator in registers before the one store: per-row and per-column
  scales (per-token activation scales, per-channel weight scales), a bias per column, an
  activation (``relu``, ``silu``, ``gelu``), the cast to ``out_dtype``.

Run it:  python examples/gemm_fp8.py [--M 256 --N 256 --K 512 --target cpu]
"""
import argparse
import math

import numpy as np

import tegula as tilelang
import tegula.language as T

ACTIVATIONS = (None, "relu", "silu", "gelu")


def _activate(v, activation):
    if activation == "relu":
        return T.max(v, 0.0)
    if activation == "silu":
        return v / (1.0 + T.exp(-v))
    if activation == "gelu":  # the tanh form
        return 0.5 * v * (1.0 + T.tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)))
    return v


@tilelang.jit(out_idx=[-1])
def matmul_fp8(M, N, K, block_M=128, block_N=256, block_K=128, num_stages=4, threads=256,
               in_dtype="float8_e4m3", out_dtype="bfloat16", promote=0, scale_rows=False,
               scale_cols=False, bias=False, activation=None):
    """Returns the ``@T.prim_func`` for (M, K) x (N, K)^T -> (M, N). Its parameters are A, B,
    then ``Sa`` (M,) if ``scale_rows``, ``Sb`` (N,) if ``scale_cols``, ``Bias`` (N,) if ``bias``
    (float32 each), then C."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")
    vectors = [(name, n) for name, n, on in (("Sa", M, scale_rows), ("Sb", N, scale_cols), ("Bias", N, bias)) if on]

    @T.macro
    def kernel_body(A, B, vec, C):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), in_dtype)
            B_shared = T.alloc_shared((block_N, block_K), in_dtype)
            C_local = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(C_local)
            if promote:
                C_accum = T.alloc_fragment((block_M, block_N), "float32")
                T.clear(C_accum)
            k_tiles = T.ceildiv(K, block_K)
            for k in T.Pipelined(k_tiles, num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[bx * block_N, k * block_K], B_shared)
                T.gemm(A_shared, B_shared, C_local, transpose_B=True)
                if promote:
                    if (k + 1) % promote == 0:
                        for i, j in T.Parallel(block_M, block_N):
                            C_accum[i, j] += C_local[i, j]
                        T.clear(C_local)
            if promote:
                if k_tiles % promote != 0:  # the k-tiles after the last promotion
                    for i, j in T.Parallel(block_M, block_N):
                        C_accum[i, j] += C_local[i, j]
                acc = C_accum
            else:
                acc = C_local
            if vectors or activation:
                for i, j in T.Parallel(block_M, block_N):
                    v = acc[i, j]
                    if scale_rows:
                        v = v * vec["Sa"][by * block_M + i]
                    if scale_cols:
                        v = v * vec["Sb"][bx * block_N + j]
                    if bias:
                        v = v + vec["Bias"][bx * block_N + j]
                    acc[i, j] = _activate(v, activation)
            T.copy(acc, C[by * block_M, bx * block_N])

    f32 = "float32"
    if len(vectors) == 0:
        @T.prim_func
        def main(A: T.Tensor((M, K), in_dtype), B: T.Tensor((N, K), in_dtype), C: T.Tensor((M, N), out_dtype)):
            kernel_body(A, B, {}, C)
    elif len(vectors) == 1:
        (n0, s0), = vectors

        @T.prim_func
        def main(A: T.Tensor((M, K), in_dtype), B: T.Tensor((N, K), in_dtype), V0: T.Tensor((s0,), f32),
                 C: T.Tensor((M, N), out_dtype)):
            kernel_body(A, B, {n0: V0}, C)
    elif len(vectors) == 2:
        (n0, s0), (n1, s1) = vectors

        @T.prim_func
        def main(A: T.Tensor((M, K), in_dtype), B: T.Tensor((N, K), in_dtype), V0: T.Tensor((s0,), f32),
                 V1: T.Tensor((s1,), f32), C: T.Tensor((M, N), out_dtype)):
            kernel_body(A, B, {n0: V0, n1: V1}, C)
    else:
        (n0, s0), (n1, s1), (n2, s2) = vectors

        @T.prim_func
        def main(A: T.Tensor((M, K), in_dtype), B: T.Tensor((N, K), in_dtype), V0: T.Tensor((s0,), f32),
                 V1: T.Tensor((s1,), f32), V2: T.Tensor((s2,), f32), C: T.Tensor((M, N), out_dtype)):
            kernel_body(A, B, {n0: V0, n1: V1, n2: V2}, C)

    return main


def reference(a, b, sa=None, sb=None, bias=None, activation=None):
    """float64 epilogue(a @ b^T) of fp8 inputs (numpy arrays of ml_dtypes fp8)."""
    c = a.astype(np.float64) @ b.astype(np.float64).T
    if sa is not None:
        c = c * sa.astype(np.float64)[:, None]
    if sb is not None:
        c = c * sb.astype(np.float64)[None, :]
    if bias is not None:
        c = c + bias.astype(np.float64)[None, :]
    if activation == "relu":
        c = np.maximum(c, 0.0)
    elif activation == "silu":
        c = c / (1.0 + np.exp(-c))
    elif activation == "gelu":
        c = 0.5 * c * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (c + 0.044715 * c ** 3)))
    return c


def random_inputs(M, N, K, in_dtype="float8_e4m3", seed=0, scale_rows=False, scale_cols=False, bias=False):
    """Fresh fp8 A, B (standard normal, rounded) and the float32 vectors the options ask for."""
    import ml_dtypes

    fp8 = {"float8_e4m3": ml_dtypes.float8_e4m3fn, "float8_e5m2": ml_dtypes.float8_e5m2}[in_dtype]
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((M, K)).astype(np.float32).astype(fp8)
    b = rng.standard_normal((N, K)).astype(np.float32).astype(fp8)
    vec = {}
    if scale_rows:  # dequantization scales: products of order 1
        vec["sa"] = (rng.uniform(0.5, 2.0, M) / math.sqrt(K)).astype(np.float32)
    if scale_cols:
        vec["sb"] = rng.uniform(0.5, 2.0, N).astype(np.float32)
    if bias:
        vec["bias"] = rng.standard_normal(N).astype(np.float32)
    return a, b, vec


def main(M=256, N=256, K=512, target="cpu", seed=0, in_dtype="float8_e4m3", promote=1,
         activation="silu", tile=(64, 128, 64, 2, 128)):
    """Runs one fused FP8 GEMM (row and column scales, bias, ``activation``, promotion every
    ``promote`` k-tiles) on ``target``; returns the relative error against float64."""
    a, b, vec = random_inputs(M, N, K, in_dtype, seed, True, True, True)
    build = tilelang.jit(out_idx=[-1], target=target)(matmul_fp8.__wrapped__)
    kernel = build(M, N, K, *tile, in_dtype=in_dtype, out_dtype="float32", promote=promote,
                   scale_rows=True, scale_cols=True, bias=True, activation=activation)
    c = np.asarray(kernel(a, b, vec["sa"], vec["sb"], vec["bias"]), dtype=np.float64)
    ref = reference(a, b, vec["sa"], vec["sb"], vec["bias"], activation)
    err = float(np.linalg.norm(c - ref) / np.linalg.norm(ref))
    print(f"fp8 gemm {M}x{N}x{K} on {target}: relative error {err:.2e}")
    return err


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--M", type=int, default=256)
    p.add_argument("--N", type=int, default=256)
    p.add_argument("--K", type=int, default=512)
    p.add_argument("--target", default="cpu")
    args = p.parse_args()
    assert main(args.M, args.N, args.K, target=args.target) < 1e-5
