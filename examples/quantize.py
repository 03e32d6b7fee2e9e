"""Per-row absmax int8 quantization: ``scale = max|x| / 127``, ``q = round(x / scale)``.

Each block takes ``block_M`` full rows, finds each row's largest magnitude with
``T.reduce_absmax``, and writes the int8 values and one float32 scale per row (so that
``x ~= q * scale``). The kernel has two outputs: ``out_idx=[-2, -1]`` makes the runtime allocate
both and return them as a tuple.

Run it:  python examples/quantize.py [--M 1000 --N 384 --target cpu]
"""
import argparse

import numpy as np

import tegula as tilelang
import tegula.language as T


def quantize_rows(M, N, block_M=8, threads=128, dtype="float16"):
    """Returns the ``@T.prim_func`` taking (X (M, N), Q int8 (M, N), S float32 (M,))."""

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Q: T.Tensor((M, N), "int8"), S: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), threads=threads) as bx:
            x = T.alloc_fragment((block_M, N), "float32")
            q = T.alloc_fragment((block_M, N), "int8")
            absmax = T.alloc_fragment((block_M,), "float32")
            scale = T.alloc_fragment((block_M,), "float32")

            T.copy(X[bx * block_M, 0], x)
            T.reduce_absmax(x, absmax, dim=1)
            for i in T.Parallel(block_M):
                scale[i] = T.max(absmax[i], 1e-8) / 127.0  # an all-zero row keeps scale > 0
            for i, j in T.Parallel(block_M, N):
                q[i, j] = T.Cast("int8", T.clamp(T.round(x[i, j] / scale[i]), -127.0, 127.0))
            T.copy(q, Q[bx * block_M, 0])
            T.copy(scale, S[bx * block_M])

    return main


def reference(x):
    x = x.astype(np.float64)
    scale = np.maximum(np.abs(x).max(axis=-1), 1e-8) / 127.0
    q = np.clip(np.round(x / scale[:, None]), -127, 127)
    return q, scale


def main(M=1000, N=384, target="auto", seed=None):
    """Run on random inputs, print and return the max error of the dequantized values."""
    rng = np.random.default_rng(seed)
    x = (3.0 * rng.standard_normal((M, N))).astype(np.float16)
    kernel = tilelang.compile(quantize_rows(M, N), out_idx=[-2, -1], target=target)
    q, s = kernel(x)
    q_ref, s_ref = reference(x)
    assert q.dtype == np.int8 and s.dtype == np.float32
    # the scale is one float32 rounding away; a value exactly between two steps may round either
    # way in float32, so q may differ from the float64 reference by one step, rarely
    assert np.allclose(s, s_ref, rtol=1e-6, atol=0), np.abs(s - s_ref).max()
    dq = np.abs(q.astype(np.int64) - q_ref)
    assert dq.max() <= 1 and (dq > 0).sum() <= max(2, dq.size // 1000), (dq.max(), int((dq > 0).sum()))
    deq = np.abs(q * s.astype(np.float64)[:, None] - x.astype(np.float64))
    err = float(deq.max())
    print(f"quantize  {M}x{N} float16->int8  target={kernel.target}  max dequantization error "
          f"{err:.3e}  (half a step: {s_ref.max() / 2:.3e})")
    assert (deq <= 0.5 * s_ref[:, None] * (1 + 1e-5)).all(), err
    return err


if __name__ == "__main__":
    p = argparse.ArgumentParser(description="per-row absmax int8 quantization")
    p.add_argument("--M", type=int, default=1000)
    p.add_argument("--N", type=int, default=384)
    p.add_argument("--target", default="auto")
    args = p.parse_args()
    main(args.M, args.N, args.target)
