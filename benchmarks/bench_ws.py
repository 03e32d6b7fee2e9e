"""Warp-specialized GEMM written with the Hopper expert API (``T.ws``, ``T.tma_copy``, mbarrier
rings, ``T.set_max_nreg``) next to tegula's default sm_90a GEMM (examples/gemm.py, TMA + wgmma in
every warpgroup) and cuBLAS, on one GPU, in one process.

    python benchmarks/bench_ws.py [--out results.json] [--sizes 4096,8192]

One producer warpgroup loads A and B tiles by TMA into ``stages`` buffers (full/empty mbarrier
rings); one or two consumer warpgroups multiply. Each result is checked against torch before it is
timed (median of CUDA-event timings, triton.testing.do_bench).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

import tegula  # noqa: E402
import tegula.language as T  # noqa: E402
from bench_cuda import bench, rel_err  # noqa: E402
from tegula.passconfig import PassConfigKey  # noqa: E402


def ws_gemm(M, N, K, bm, bn, bk, stages, consumers, dtype, nreg=(40, 232)):
    """A producer warpgroup (the last) and ``consumers`` consumer warpgroups (stacked along M)."""
    threads = 128 * (consumers + 1)
    cons = tuple(range(consumers))

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            A_s = T.alloc_shared((stages, bm, bk), dtype)
            B_s = T.alloc_shared((stages, bk, bn), dtype)
            C_l = T.alloc_fragment((bm, bn), "float32")
            full = T.alloc_barrier([128] * stages)
            empty = T.alloc_barrier([128 * consumers] * stages)
            T.use_swizzle(panel_size=10)
            with T.ws(consumers):
                if nreg:
                    T.set_max_nreg(nreg[0], 0)
            with T.ws(*cons):
                if nreg:
                    T.set_max_nreg(nreg[1], 1)
                T.clear(C_l)
            for ko in range(T.ceildiv(K, bk)):
                with T.ws(consumers):
                    T.mbarrier_wait_parity(empty[ko % stages], ((ko // stages) % 2) ^ 1)
                    T.tma_copy(A[by * bm, ko * bk], A_s[ko % stages, :, :], barrier=full[ko % stages])
                    T.tma_copy(B[ko * bk, bx * bn], B_s[ko % stages, :, :], barrier=full[ko % stages])
                    T.mbarrier_arrive(full[ko % stages])
                with T.ws(*cons):
                    T.mbarrier_wait_parity(full[ko % stages], (ko // stages) % 2)
                    T.gemm(A_s[ko % stages, :, :], B_s[ko % stages, :, :], C_l)
                    T.mbarrier_arrive(empty[ko % stages])
            with T.ws(*cons):
                T.copy(C_l, C[by * bm, bx * bn])

    return main


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", default="")
    p.add_argument("--sizes", default="4096,8192")
    args = p.parse_args()
    import gemm as ex

    rows = []
    ws_cfgs = [(128, 256, 64, 4, 2), (128, 256, 64, 3, 2), (128, 128, 64, 4, 1), (128, 128, 64, 5, 2)]
    for dtype in ("float16", "bfloat16"):
        tdt = getattr(torch, dtype)
        for n in [int(s) for s in args.sizes.split(",")]:
            M = N = K = n
            a = torch.randn(M, K, device="cuda", dtype=tdt)
            b = torch.randn(K, N, device="cuda", dtype=tdt)
            ref = (a.float() @ b.float()).double()
            flops = 2 * M * N * K
            row = {"dtype": dtype, "shape": f"{M}x{N}x{K}", "cublas_tflops": flops / bench(lambda: a @ b) / 1e9}
            cands = [("default", c, lambda c=c: tegula.compile(ex.matmul.get_tir(M, N, K, *c, dtype=dtype),
                                                               out_idx=[-1], target="cuda"))
                     for c in [(128, 256, 64, 4, 256), (128, 256, 64, 3, 256)]]
            cands += [("ws", c, lambda c=c: tegula.compile(ws_gemm(M, N, K, *c, dtype), out_idx=[-1], target="cuda"))
                      for c in ws_cfgs]
            cands += [("ws_nonreg", ws_cfgs[0], lambda: tegula.compile(ws_gemm(M, N, K, *ws_cfgs[0], dtype, nreg=None),
                                                                        out_idx=[-1], target="cuda"))]
            for label, c, build in cands:
                try:
                    t0 = time.time()
                    k = build()
                    ct = time.time() - t0
                    out = k(a, b)
                    err = rel_err(out, ref)
                    t = bench(lambda: k(a, b))
                except Exception as e:  # report and go on
                    print(f"  {label} {dtype} {n} {c}: {type(e).__name__}: {str(e)[:300]}")
                    continue
                tf = flops / t / 1e9
                print(f"  {label:9s} {dtype} {n} {c}: {tf:7.1f} TFLOP/s err {err:.2e} compile {ct:.2f}s")
                if err < 1e-2 and tf > row.get(f"{label}_tflops", 0):
                    row[f"{label}_tflops"], row[f"{label}_config"] = tf, "x".join(map(str, c))
            rows.append(row)
            print(row)
    if args.out:
        Path(args.out).write_text(json.dumps({"gemm_ws": rows, "device": torch.cuda.get_device_name(),
                                              "torch": torch.__version__}, indent=1))


if __name__ == "__main__":
    main()
