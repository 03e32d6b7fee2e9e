"""The inputs of the golden pass tests: one small kernel per CUDA pass.

Each pass runs alone on the IR the pipeline hands it (the kernel after the passes before it);
``golden/<Pass>.txt`` holds that input and the pass's output. Kernels live in this file, whose line
numbers the printed IR shows, so keep new kernels at the end.

Regenerate after a deliberate change and review the diff::

    python -m tests.transform.regen          # rewrites golden/*.txt, prints what changed
"""
from __future__ import annotations

from pathlib import Path

import tegula.language as T
from tegula.transform import pipeline_for

GOLDEN = Path(__file__).resolve().parent / "golden"


def index_arith():
    @T.prim_func
    def main(X: T.Tensor((256,), "float32"), Y: T.Tensor((256,), "float32")):
        with T.Kernel(T.ceildiv(256, 128), threads=128) as bx:
            for i in T.Parallel(128):
                Y[bx * 128 + i + 64 - 64] = X[(bx * 128 + i) * 1 + 0] * 2.0

    return main


def causal():
    @T.prim_func
    def main(S: T.Tensor((128, 128), "float32")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            acc = T.alloc_fragment((64, 64), "float32")
            T.fill(acc, 1.0)
            for i, j in T.Parallel(64, 64):
                acc[i, j] = T.if_then_else(by * 64 + i >= bx * 64 + j, acc[i, j], -1.0)
            T.copy(acc, S[by * 64, bx * 64])

    return main


def small_gemm():
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16"),
             C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, 1, threads=128) as (bx, by):
            A_s = T.alloc_shared((64, 32), "float16")
            B_s = T.alloc_shared((32, 64), "float16")
            C_l = T.alloc_fragment((64, 64), "float32")
            m = T.alloc_fragment((64,), "float32")
            T.clear(C_l)
            for k in T.Pipelined(2, num_stages=2):
                T.copy(A[0, k * 32], A_s)
                T.copy(B[k * 32, 0], B_s)
                T.gemm(A_s, B_s, C_l)
            T.reduce_max(C_l, m, dim=1)
            for i, j in T.Parallel(64, 64):
                C_l[i, j] = C_l[i, j] - m[i]
            T.copy(C_l, C[0, 0])

    return main


def handoffs():
    @T.prim_func
    def main(X: T.Tensor((256,), "float32"), Y: T.Tensor((256,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            a = T.alloc_shared((128,), "float32")
            b = T.alloc_shared((128,), "float32")
            c = T.alloc_shared((128,), "float32")
            T.copy(X[0:128], a)
            for i in T.Parallel(128):
                b[i] = a[127 - i] * 2.0
            for i in T.Parallel(128):
                Y[i] = b[i]
            T.copy(X[128:256], c)
            for i in T.Parallel(128):
                Y[128 + i] = c[i]

    return main


def row_sums():
    @T.prim_func
    def main(X: T.Tensor((16, 64), "float32"), Y: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            x = T.alloc_fragment((16, 64), "float32")
            s = T.alloc_fragment((16,), "float32")
            T.copy(X[0, 0], x)
            T.reduce_sum(x, s, dim=1)
            T.copy(s, Y[0])

    return main


def phases():
    @T.prim_func
    def main(X: T.Tensor((64, 32), "float32"), Y: T.Tensor((16, 32), "float32")):
        with T.Kernel(1, threads=128) as bx:
            t = T.alloc_shared((16, 32), "float32")   # live through the loop
            o = T.alloc_shared((16, 32), "float32")   # live after it: takes t's bytes
            acc = T.alloc_fragment((16, 32), "float32")
            T.clear(acc)
            for k in T.serial(4):
                T.copy(X[k * 16, 0], t)
                for i, j in T.Parallel(16, 32):
                    acc[i, j] += t[i, j]
            T.copy(acc, o)
            T.copy(o, Y[0, 0])

    return main


def triangle():
    """Block bx sums the first bx + 1 rows of tiles: longer loops at larger bx (causal-like)."""
    @T.prim_func
    def main(X: T.Tensor((256, 32), "float32"), Y: T.Tensor((256, 32), "float32")):
        with T.Kernel(4, threads=128) as bx:
            t = T.alloc_shared((64, 32), "float32")
            acc = T.alloc_fragment((64, 32), "float32")
            T.clear(acc)
            for k in T.Pipelined(bx + 1, num_stages=2):
                T.copy(X[k * 64, 0], t)
                for i, j in T.Parallel(64, 32):
                    acc[i, j] += t[i, j]
            T.copy(acc, Y[bx * 64, 0])

    return main


# the sm_90a passes after WarpSpecialize see the kernels it leaves (pass configs of a case)
NO_WS = {"tl.disable_warp_specialized": True}

# pass name -> (kernel, target[, pass configs]): every pass of the CUDA pipeline has one


def vector_loads():
    @T.prim_func
    def main(X: T.Tensor((8, 256), "float16"), Y: T.Tensor((8,), "float32")):
        with T.Kernel(8, threads=32) as bx:
            tx = T.get_thread_binding()
            x = T.alloc_local((8,), "float16")
            acc = T.alloc_local((1,), "float32")
            for k in T.vectorized(8):
                x[k] = X[bx, tx * 8 + k]
            acc[0] = 0.0
            for k in T.serial(8):
                acc[0] += x[k].astype("float32")
            T.atomic_add(Y[bx], acc[0])

    return main


CASES = {
    "Simplify": (index_arith, "cuda:sm_80"),
    "SpecializeMasks": (causal, "cuda:sm_80"),
    "PipelineCopies": (small_gemm, "cuda:sm_80"),
    "InferLayouts": (small_gemm, "cuda:sm_80"),
    "LowerTileOps": (row_sums, "cuda:sm_80"),
    "InsertBarriers": (handoffs, "cuda:sm_80"),
    "SimplifyLowered": (row_sums, "cuda:sm_80"),
    "PlanSharedMemory": (phases, "cuda:sm_80"),
    "CheckResources": (handoffs, "cuda:sm_90a"),
    "TmaPipeline": (small_gemm, "cuda:sm_90a", NO_WS),
    "UseWgmma": (small_gemm, "cuda:sm_90a", NO_WS),
    "WarpSpecialize": (small_gemm, "cuda:sm_90a"),
    # the accumulator's store staged through a shared tile (the default leaves fragments)
    "TmaStores": (small_gemm, "cuda:sm_90a", {"tegula.tma_store": True}),
    "OrderBlocks": (triangle, "cuda:sm_90a"),
    "VectorizeLoops": (vector_loads, "cuda:sm_80"),
}


def before_after(name: str) -> tuple[str, str]:
    """The IR the pipeline hands pass ``name`` for its case, and the IR that pass alone makes of it."""
    kernel, target, *configs = CASES[name]
    pipeline = pipeline_for(target, configs[0] if configs else None)
    func = pipeline.until(name).run(kernel(), instruments=[])
    out = pipeline[name](func)
    return func.script(), out.script()


def render(name: str) -> str:
    """The golden text of pass ``name``."""
    kernel, target, *configs = CASES[name]
    before, after = before_after(name)
    cfg = f" with {configs[0]}" if configs else ""
    head = (f"# {name} on {kernel.__name__}() for {target}{cfg}: the IR before it, then after it alone.\n"
            "# Generated by `python -m tests.transform.regen`; review changes as a diff.\n")
    return f"{head}## before\n{before.rstrip()}\n## after\n{after.rstrip()}\n"


def path_of(name: str) -> Path:
    return GOLDEN / f"{name}.txt"



def wide_gemm():
    @T.prim_func
    def main(A: T.Tensor((4096, 4096), "float16"), B: T.Tensor((4096, 4096), "float16"),
             C: T.Tensor((4096, 4096), "float32")):
        with T.Kernel(64, 64, threads=128) as (bx, by):
            A_s = T.alloc_shared((64, 32), "float16")
            B_s = T.alloc_shared((32, 64), "float16")
            C_l = T.alloc_fragment((64, 64), "float32")
            T.clear(C_l)
            for k in T.Pipelined(128, num_stages=3):
                T.copy(A[by * 64, k * 32], A_s)
                T.copy(B[k * 32, bx * 64], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * 64, bx * 64])

    return main


CASES["RasterBlocks"] = (wide_gemm, "cuda:sm_90a")
