"""Time the interpreter (``target="cpu"``) on a 1024^3 fp16 GEMM and flash attention forward.

The kernels are those of ``examples/gemm.py`` and ``examples/flash_attention.py``, one
128x128x32 ``T.gemm`` repeated 2048 times in a serial loop (the cost of one tile GEMM call), and
a hand-written tensor-core GEMM (``TensorCoreIntrinEmitter``: ldmatrix / mma.sync per warp, a
thread-level kernel, which target cpu runs as the emulator does).

Runs on one core (BLAS threads pinned to 1 unless already set). Prints the first run (which
includes compiling the IR to closures) and the median of the following runs, and checks the
results against float64 numpy.

    python benchmarks/interp_bench.py [--repeat 3]
"""

import os

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Callable  # noqa: E402

import numpy as np  # noqa: E402

import tegula.language as T  # noqa: E402
from tegula.backends.interp import execute  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import flash_attention  # noqa: E402
import gemm  # noqa: E402


CLOCK = time.perf_counter


def timed(fn: Callable[[], None], repeat: int) -> tuple[float, float]:
    t = CLOCK()
    fn()
    first = CLOCK() - t
    runs = []
    for _ in range(repeat):
        t = CLOCK()
        fn()
        runs.append(CLOCK() - t)
    return first, statistics.median(runs) if runs else first


def emitter_gemm(n: int):
    """C = A @ B^T, 128x128x32 block tiles of 2x2 warps (64x64 each), as TensorCoreIntrinEmitter
    users write it."""
    from tegula.cuda.intrinsics.macro.mma_macro_generator import TensorCoreIntrinEmitter

    em = TensorCoreIntrinEmitter(a_dtype="float16", b_dtype="float16", accum_dtype="float32",
                                 b_transposed=True, block_row_warps=2, block_col_warps=2,
                                 warp_row_tiles=64, warp_col_tiles=64, chunk=32)

    @T.prim_func
    def mm(A: T.Tensor((n, n), "float16"), B: T.Tensor((n, n), "float16"), C: T.Tensor((n, n), "float32")):
        with T.Kernel(n // 128, n // 128, threads=128) as (bx, by):
            A_s = T.alloc_shared((128, 32), "float16")
            B_s = T.alloc_shared((128, 32), "float16")
            A_l = T.alloc_local((em.warp_rows * em.local_size_a), "float16")
            B_l = T.alloc_local((em.warp_cols * em.local_size_b), "float16")
            C_l = T.alloc_local((em.warp_rows * em.warp_cols * em.local_size_out), "float32")
            T.clear(C_l)
            for ko in T.Pipelined(n // 32, num_stages=2):
                for i, k in T.Parallel(128, 32):
                    A_s[i, k] = A[by * 128 + i, ko * 32 + k]
                for j, k in T.Parallel(128, 32):
                    B_s[j, k] = B[bx * 128 + j, ko * 32 + k]
                for ki in T.serial(2):
                    em.ldmatrix_a(A_l, A_s, ki)
                    em.ldmatrix_b(B_l, B_s, ki)
                    em.mma(A_l, B_l, C_l)
            em.stmatrix(C_l, C, pid_m=by, pid_n=bx)
    return mm


@T.prim_func
def gemm_loop(X: T.Tensor((128, 32), "float16"), Y: T.Tensor((32, 128), "float16"),
              Z: T.Tensor((128, 128), "float32")):
    with T.Kernel(1, threads=128) as _:
        A = T.alloc_shared((128, 32), "float16")
        B = T.alloc_shared((32, 128), "float16")
        C = T.alloc_fragment((128, 128), "float32")
        T.copy(X, A)
        T.copy(Y, B)
        T.clear(C)
        for _k in T.serial(2048):
            T.gemm(A, B, C)
        T.copy(C, Z)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="cpu: this process's CPU time (time.process_time), for a machine others load too")
    ap.add_argument("--only", default="", help="print only the kernels whose name contains this")
    args = ap.parse_args()
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    rng = np.random.default_rng(0)
    rows = []

    n = 1024
    a, b = (rng.standard_normal((n, n)).astype(np.float16) for _ in range(2))
    c = np.full((n, n), np.nan, np.float16)
    f = gemm.matmul.get_tir(n, n, n, 128, 128, 32, 3, 128)
    first, med = timed(lambda: execute(f, [a, b, c]), args.repeat)
    err = np.abs(c - gemm.reference(a, b)).max()
    rows.append(("gemm 1024^3 fp16, 128x128x32 tiles", first, med, err))

    for causal in (False, True):
        q, k, v = (rng.standard_normal((1, 4, 1024, 64)).astype(np.float16) for _ in range(3))
        o = np.full_like(q, np.nan)
        f = flash_attention.flash_attention(1, 4, 1024, 64, causal, block_M=128, block_N=64)
        first, med = timed(lambda: execute(f, [q, k, v, o]), args.repeat)
        err = np.abs(o - flash_attention.reference(q, k, v, causal)).max()
        rows.append((f"flash attn fwd b1 h4 s1024 d64 (128x64){' causal' if causal else ''}",
                     first, med, err))

    x, y = (rng.standard_normal(s).astype(np.float16) for s in ((128, 32), (32, 128)))
    z = np.full((128, 128), np.nan, np.float32)
    first, med = timed(lambda: execute(gemm_loop, [x, y, z]), args.repeat)
    err = np.abs(z - 2048 * (x.astype(np.float64) @ y.astype(np.float64))).max() / 2048
    rows.append(("2048 x T.gemm 128x128x32 fp16 in a serial loop", first, med, err))

    import tegula

    n = 256
    a, b = (rng.standard_normal((n, n)).astype(np.float16) for _ in range(2))
    c = np.full((n, n), np.nan, np.float32)
    k = tegula.compile(emitter_gemm(n), target="cpu")
    first, med = timed(lambda: k(a, b, c), args.repeat)
    err = np.abs(c - a.astype(np.float64) @ b.astype(np.float64).T).max()
    rows.append(("mma.sync emitter gemm 256^3 fp16 (thread-level)", first, med, err))

    print(f"{'kernel':<52} {'first s':>8} {'median s':>9} {'max err':>9}")
    for name, first, med, err in rows:
        if args.only not in name:
            continue
        print(f"{name:<52} {first:8.3f} {med:9.3f} {err:9.2e}")


if __name__ == "__main__":
    main()
