"""Time the interpreter (``target="cpu"``) on a 1024^3 fp16 GEMM, flash attention forward and fp8 tiles.

The kernels are those of ``examples/gemm.py`` and ``examples/flash_attention.py``, one
128x128x32 ``T.gemm`` repeated 2048 times in a serial loop (the cost of one tile GEMM call), the
same for deepgemm's 64x128x128 fp8 e4m3 tile (its operands converted to float32 at every call),
a hand-written tensor-core GEMM (``TensorCoreIntrinEmitter``: ldmatrix / mma.sync per warp, a
thread-level kernel, which target cpu runs as the emulator does), an im2col convolution
(64x64x128 NHWC input, 3x3, 128 filters: 64 blocks x 36 k-steps of ``T.im2col`` + copy + gemm,
the tiling of the corpus's convolution), 512 steps of attention's backward on one block (its
K tile multiplied at every step, each q tile twice: gemm operands kept converted,
``tegula/backends/interp/operands.py``) and a warp-specialized GEMM (``T.ws`` producer and
consumer warpgroups handing one tile back and forth on two mbarriers; thread-level).
``--no-keep`` compiles without kept subexpressions (``tegula/backends/memo.py``) to compare;
``--batch 1`` runs every launch one block after another (``tegula/backends/interp/batch.py``:
by default up to 64 blocks run side by side where the rule allows).

Runs on one core (BLAS threads pinned to 1 unless already set). Prints the first run (which
includes compiling the IR to closures) and the median of the following runs, and checks the
results against float64 numpy.

    python benchmarks/interp_bench.py [--repeat 3] [--clock cpu] [--only NAME] [--no-keep] [--batch N]
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


def gemm_loop(a_shape: tuple, b_shape: tuple, dtype: str, reps: int, transpose_B: bool = False):
    """One block repeating ``T.gemm(A, B, C)`` on shared tiles ``reps`` times: the cost of one call."""
    M, N = a_shape[0], (b_shape[0] if transpose_B else b_shape[1])

    @T.prim_func
    def loop(X: T.Tensor(a_shape, dtype), Y: T.Tensor(b_shape, dtype), Z: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128) as _:
            A = T.alloc_shared(a_shape, dtype)
            B = T.alloc_shared(b_shape, dtype)
            C = T.alloc_fragment((M, N), "float32")
            T.copy(X, A)
            T.copy(Y, B)
            T.clear(C)
            for _k in T.serial(reps):
                T.gemm(A, B, C, transpose_B=transpose_B)
            T.copy(C, Z)
    return loop


def backward_steps(steps: int, bm: int = 128, bn: int = 32, d: int = 128):
    """Attention's backward step in small, one block: the block's K tile feeds a gemm at every
    step, each step's q tile two (the corpus's gqa_sink_bwd_varlen tiling)."""
    s = steps * bn

    @T.prim_func
    def bwd(K: T.Tensor((bm, d), "float16"), Q: T.Tensor((s, d), "float16"), dK: T.Tensor((bm, d), "float32")):
        with T.Kernel(1, threads=256) as bx:
            K_s = T.alloc_shared((bm, d), "float16")
            q_s = T.alloc_shared((bn, d), "float16")
            s_f = T.alloc_fragment((bm, bn), "float32")
            s_c = T.alloc_fragment((bm, bn), "float16")
            dk = T.alloc_fragment((bm, d), "float32")
            T.copy(K, K_s)
            T.clear(dk)
            for k in T.serial(steps):
                T.copy(Q[k * bn, 0], q_s)
                T.gemm(K_s, q_s, s_f, transpose_B=True, clear_accum=True)
                T.copy(s_f, s_c)
                T.gemm(s_c, q_s, dk)
            T.copy(dk, dK)
    return bwd


def backward_reference(k: np.ndarray, q: np.ndarray, bn: int = 32) -> np.ndarray:
    k64, q64 = k.astype(np.float64), q.astype(np.float64)
    out = np.zeros(k.shape)
    for j in range(0, q.shape[0], bn):
        sc = (k64 @ q64[j:j + bn].T).astype(np.float16).astype(np.float64)
        out += sc @ q64[j:j + bn]
    return out


def conv_im2col(n: int, h: int = 64, w: int = 64, c: int = 128, f: int = 128):
    """3x3 convolution, stride 1, padding 1, NHWC fp16: im2col tiles of 64 output pixels x 32
    of the 9c patch columns, times 32 x 128 weight tiles."""
    bm, bn, bk, kk = 64, 128, 32, 3

    @T.prim_func
    def conv(x: T.Tensor((n, h, w, c), "float16"), wt: T.Tensor((kk, kk, c, f), "float16"),
             y: T.Tensor((n, h, w, f), "float16")):
        with T.Kernel(T.ceildiv(f, bn), T.ceildiv(n * h * w, bm), threads=256) as (bx, by):
            patch = T.alloc_shared((bm, bk), "float16")
            w_s = T.alloc_shared((bk, bn), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            w_mat = T.Tensor((kk * kk * c, f), "float16", wt.data)
            y_mat = T.Tensor((n * h * w, f), "float16", y.data)
            T.clear(acc)
            for kt in T.Pipelined(T.ceildiv(kk * kk * c, bk), num_stages=3):
                T.im2col(x, patch, by, kt, kk, 1, 1, 1)
                T.copy(w_mat[kt * bk, bx * bn], w_s)
                T.gemm(patch, w_s, acc)
            T.copy(acc, y_mat[by * bm, bx * bn])
    return conv


def conv_reference(x: np.ndarray, wt: np.ndarray) -> np.ndarray:
    n, h, w, _ = x.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (1, 1), (1, 1), (0, 0)))
    out = np.zeros((n, h, w, wt.shape[-1]))
    for i in range(3):
        for j in range(3):
            out += xp[:, i:i + h, j:j + w] @ wt[i, j].astype(np.float64)
    return out


def handoff_gemm(n: int, bm: int = 128, bn: int = 128, bk: int = 64):
    """C = A @ B: warpgroup 0 brings the A and B tiles, warpgroup 1 multiplies them; one tile
    each, handed over on a 'ready' and a 'free' mbarrier."""
    @T.prim_func
    def ws(A: T.Tensor((n, n), "float16"), B: T.Tensor((n, n), "float16"), C: T.Tensor((n, n), "float16")):
        with T.Kernel(n // bn, n // bm, threads=256) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            ready = T.alloc_barrier(arrive_count=128)
            free = T.alloc_barrier(arrive_count=128)
            with T.ws(1):
                T.clear(acc)
            for ko in T.Pipelined(n // bk, num_stages=0):
                with T.ws(0):
                    T.barrier_wait(free, (ko + 1) % 2)
                    T.tma_copy(A[by * bm, ko * bk], A_s, barrier=ready)
                    T.tma_copy(B[ko * bk, bx * bn], B_s, barrier=ready)
                    T.barrier_arrive(ready)
                with T.ws(1):
                    T.barrier_wait(ready, ko % 2)
                    T.gemm(A_s, B_s, acc)
                    T.barrier_arrive(free)
            with T.ws(1):
                T.copy(acc, C[by * bm, bx * bn])
    return ws


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="cpu: this process's CPU time (time.process_time), for a machine others load too")
    ap.add_argument("--only", default="", help="run only the kernels whose name contains this")
    ap.add_argument("--no-keep", action="store_true",
                    help="compile without kept subexpressions (tegula/backends/memo.py)")
    ap.add_argument("--batch", type=int, default=0,
                    help="at most this many blocks side by side (1: one after another; default: the setting)")
    args = ap.parse_args()
    from tegula import config

    with config.override(**({"interp_batch": args.batch} if args.batch else {})):
        run(args)


def run(args: argparse.Namespace) -> None:
    if args.no_keep:
        from tegula.backends import memo

        memo.KEEP = False
    global CLOCK
    CLOCK = time.process_time if args.clock == "cpu" else time.perf_counter
    rng = np.random.default_rng(0)
    rows = []
    import tegula

    def want(name: str) -> bool:
        return args.only in name

    name = "gemm 1024^3 fp16, 128x128x32 tiles"
    if want(name):
        n = 1024
        a, b = (rng.standard_normal((n, n)).astype(np.float16) for _ in range(2))
        c = np.full((n, n), np.nan, np.float16)
        f = gemm.matmul.get_tir(n, n, n, 128, 128, 32, 3, 128)
        first, med = timed(lambda: execute(f, [a, b, c]), args.repeat)
        rows.append((name, first, med, np.abs(c - gemm.reference(a, b)).max()))

    for causal in (False, True):
        name = f"flash attn fwd b1 h4 s1024 d64 (128x64){' causal' if causal else ''}"
        if not want(name):
            continue
        q, k, v = (rng.standard_normal((1, 4, 1024, 64)).astype(np.float16) for _ in range(3))
        o = np.full_like(q, np.nan)
        f = flash_attention.flash_attention(1, 4, 1024, 64, causal, block_M=128, block_N=64)
        first, med = timed(lambda: execute(f, [q, k, v, o]), args.repeat)
        rows.append((name, first, med, np.abs(o - flash_attention.reference(q, k, v, causal)).max()))

    name = "2048 x T.gemm 128x128x32 fp16 in a serial loop"
    if want(name):
        x, y = (rng.standard_normal(s).astype(np.float16) for s in ((128, 32), (32, 128)))
        z = np.full((128, 128), np.nan, np.float32)
        first, med = timed(lambda: execute(gemm_loop((128, 32), (32, 128), "float16", 2048), [x, y, z]),
                           args.repeat)
        err = np.abs(z - 2048 * (x.astype(np.float64) @ y.astype(np.float64))).max() / 2048
        rows.append((name, first, med, err))

    name = "512 x T.gemm 64x128x128 fp8 e4m3 (deepgemm's tile)"
    if want(name):
        import ml_dtypes

        x, y = (rng.standard_normal(s).astype(ml_dtypes.float8_e4m3fn) for s in ((64, 128), (128, 128)))
        z = np.full((64, 128), np.nan, np.float32)
        f = gemm_loop((64, 128), (128, 128), "float8_e4m3", 512, transpose_B=True)
        first, med = timed(lambda: execute(f, [x, y, z]), args.repeat)
        err = np.abs(z - 512 * (x.astype(np.float64) @ y.astype(np.float64).T)).max() / 512
        rows.append((name, first, med, err))

    name = "attn bwd step x 512: K 128x128 kept, q 32x128 fp16"
    if want(name):
        k = (rng.standard_normal((128, 128)) / 4).astype(np.float16)
        q = (rng.standard_normal((512 * 32, 128)) / 4).astype(np.float16)
        dk = np.full((128, 128), np.nan, np.float32)
        f = backward_steps(512)
        first, med = timed(lambda: execute(f, [k, q, dk]), args.repeat)
        rows.append((name, first, med, np.abs(dk - backward_reference(k, q)).max()))

    name = "mma.sync emitter gemm 256^3 fp16 (thread-level)"
    if want(name):
        n = 256
        a, b = (rng.standard_normal((n, n)).astype(np.float16) for _ in range(2))
        c = np.full((n, n), np.nan, np.float32)
        k = tegula.compile(emitter_gemm(n), target="cpu")
        first, med = timed(lambda: k(a, b, c), args.repeat)
        rows.append((name, first, med, np.abs(c - a.astype(np.float64) @ b.astype(np.float64).T).max()))

    name = "conv 3x3 im2col 1x64x64x128 -> 128 (64 x 36 steps)"
    if want(name):
        x = rng.standard_normal((1, 64, 64, 128)).astype(np.float16)
        wt = (rng.standard_normal((3, 3, 128, 128)) / 16).astype(np.float16)
        y = np.full((1, 64, 64, 128), np.nan, np.float16)
        k = tegula.compile(conv_im2col(1), target="cpu")
        first, med = timed(lambda: k(x, wt, y), args.repeat)
        rows.append((name, first, med, np.abs(y - conv_reference(x, wt)).max()))

    name = "T.ws producer/consumer gemm 256^3 fp16 (thread-level)"
    if want(name):
        n = 256
        a, b = (rng.standard_normal((n, n)).astype(np.float16) for _ in range(2))
        c = np.full((n, n), np.nan, np.float16)
        k = tegula.compile(handoff_gemm(n), target="cpu")
        first, med = timed(lambda: k(a, b, c), args.repeat)
        rows.append((name, first, med, np.abs(c - a.astype(np.float64) @ b.astype(np.float64)).max()))

    print(f"{'kernel':<52} {'first s':>8} {'median s':>9} {'max err':>9}")
    for name, first, med, err in rows:
        print(f"{name:<52} {first:8.3f} {med:9.3f} {err:9.2e}")


if __name__ == "__main__":
    main()
