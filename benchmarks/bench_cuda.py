"""CUDA benchmarks: tegula against its peers, in one process, on one GPU.

    python benchmarks/bench_cuda.py [--out results.json] [--quick] [--only gemm,attention,...]

Sections (each prints a table; ratios are tegula / peer, higher is better for tegula):
- gemm: fp16 / bf16 at 4096^3 and 8192^3 against torch.matmul (cuBLAS);
- attention: flash attention forward, head dim 64 and 128, causal and not, 16k tokens, against
  SDPA's flash and cuDNN backends;
- memory: RMSNorm and row softmax at 8192x8192 fp16/bf16 against the device-to-device copy
  bandwidth measured in the same run;
- compile: cold compile of the GEMM kernel, a cached load, and launch overhead of a small kernel.

Every tegula result is checked against torch (relative error) before it is timed. Timing is the
median of triton.testing.do_bench (CUDA events) when triton is present, else of CUDA events.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import torch  # noqa: E402

import tegula  # noqa: E402

RESULTS: dict = {"sections": {}}


def bench(fn, warmup=25, rep=100) -> float:
    """Median milliseconds."""
    try:
        import triton.testing

        return float(triton.testing.do_bench(fn, warmup=warmup, rep=rep, return_mode="median"))
    except ImportError:
        for _ in range(5):
            fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(50):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            torch.cuda.synchronize()
            times.append(a.elapsed_time(b))
        times.sort()
        return times[len(times) // 2]


def rel_err(out, ref) -> float:
    out, ref = out.double(), ref.double()
    return float((out - ref).norm() / ref.norm().clamp_min(1e-30))


def table(title, rows, cols):
    print(f"\n== {title}")
    print(" | ".join(f"{c:>14}" for c in cols))
    for r in rows:
        print(" | ".join(f"{r.get(c, ''):>14.4g}" if isinstance(r.get(c), float) else f"{str(r.get(c, '')):>14}" for c in cols))


def section(name):
    def deco(fn):
        def run(args):
            t0 = time.time()
            try:
                rows = fn(args)
                RESULTS["sections"][name] = {"rows": rows, "seconds": time.time() - t0}
            except Exception as e:  # a failing section must not hide the others
                traceback.print_exc()
                RESULTS["sections"][name] = {"error": f"{type(e).__name__}: {e}"[:2000]}
        run.__name__ = name
        return run
    return deco


@section("gemm")
def gemm_section(args):
    import gemm as ex

    rows = []
    sizes = [4096] if args.quick else [4096, 8192]
    configs = [(128, 128, 32, 3, 128), (128, 128, 32, 4, 128), (128, 128, 64, 3, 128), (128, 256, 32, 3, 256),
               (128, 256, 64, 3, 256), (256, 128, 32, 3, 256), (128, 128, 64, 4, 256)]
    for dtype in ("float16", "bfloat16"):
        tdt = getattr(torch, dtype)
        for n in sizes:
            a = torch.randn(n, n, device="cuda", dtype=tdt)
            b = torch.randn(n, n, device="cuda", dtype=tdt)
            ref = a @ b
            t_peer = bench(lambda: a @ b)
            flops = 2 * n ** 3
            best = None
            for bm, bn, bk, st, th in configs:
                try:
                    k = tegula.compile(ex.matmul.get_tir(n, n, n, bm, bn, bk, st, th, dtype=dtype), out_idx=[-1], target="cuda")
                    c = k(a, b)
                    err = rel_err(c, ref)
                    t = bench(lambda: k(a, b))
                    row = {"dtype": dtype, "n": n, "config": f"{bm}x{bn}x{bk}s{st}t{th}", "tegula_ms": t,
                           "cublas_ms": t_peer, "tegula_tflops": flops / t / 1e9,
                           "cublas_tflops": flops / t_peer / 1e9, "ratio": t_peer / t, "rel_err": err}
                    print(row)
                    if err < 1e-2 and (best is None or t < best["tegula_ms"]):
                        best = row
                except Exception as e:
                    print(f"gemm {dtype} {n} {bm}x{bn}x{bk}: {type(e).__name__}: {str(e)[:300]}")
            if best:
                rows.append(best)
    table("GEMM vs torch.matmul (cuBLAS)", rows, ["dtype", "n", "config", "tegula_tflops", "cublas_tflops", "ratio", "rel_err"])
    return rows


@section("attention")
def attention_section(args):
    import flash_attention as ex
    from torch.nn.attention import SDPBackend, sdpa_kernel
    import torch.nn.functional as F

    rows = []
    tokens = 16384
    for dim in (64, 128):
        for causal in (False, True):
            batch, seq = 4, tokens // 4
            heads = 16 if dim == 128 else 32
            q = torch.randn(batch, heads, seq, dim, device="cuda", dtype=torch.float16)
            k_ = torch.randn_like(q)
            v = torch.randn_like(q)
            ref = F.scaled_dot_product_attention(q, k_, v, is_causal=causal)
            flops = 4 * batch * heads * seq * seq * dim * (0.5 if causal else 1.0)
            peers = {}
            for name, be in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
                try:
                    with sdpa_kernel([be]):
                        F.scaled_dot_product_attention(q, k_, v, is_causal=causal)
                        peers[name] = bench(lambda: F.scaled_dot_product_attention(q, k_, v, is_causal=causal))
                except Exception as e:
                    print(f"sdpa {name}: {e}")
            best = None
            for bm, bn, st, th in ((128, 64, 2, 128), (128, 128, 2, 128), (64, 64, 2, 128), (128, 128, 2, 256)):
                try:
                    kern = tegula.compile(ex.flash_attention(batch, heads, seq, dim, causal, 1, bm, bn, st, th),
                                          out_idx=[-1], target="cuda")
                    o = kern(q, k_, v)
                    err = rel_err(o, ref)
                    t = bench(lambda: kern(q, k_, v))
                    row = {"dim": dim, "causal": causal, "config": f"{bm}x{bn}s{st}t{th}", "tegula_ms": t,
                           "tegula_tflops": flops / t / 1e9, "rel_err": err}
                    for name, tp in peers.items():
                        row[f"{name}_tflops"] = flops / tp / 1e9
                        row[f"vs_{name}"] = tp / t
                    print(row)
                    if err < 1e-2 and (best is None or t < best["tegula_ms"]):
                        best = row
                except Exception as e:
                    print(f"attention d{dim} causal={causal} {bm}x{bn}: {type(e).__name__}: {str(e)[:300]}")
            if best:
                rows.append(best)
    table("Flash attention forward vs SDPA", rows,
          ["dim", "causal", "config", "tegula_tflops", "flash_tflops", "cudnn_tflops", "vs_flash", "vs_cudnn", "rel_err"])
    return rows


@section("memory")
def memory_section(args):
    import rmsnorm
    import softmax

    rows = []
    M = N = 8192
    x = torch.randn(M, N, device="cuda", dtype=torch.float16)
    y = torch.empty_like(x)
    t_copy = bench(lambda: y.copy_(x))
    copy_gbs = 2 * x.numel() * 2 / t_copy / 1e6
    print(f"device-to-device copy: {copy_gbs:.0f} GB/s")
    for dtype in ("float16", "bfloat16"):
        tdt = getattr(torch, dtype)
        x = torch.randn(M, N, device="cuda", dtype=tdt)
        w = torch.randn(N, device="cuda", dtype=tdt)
        for name, build, ref_fn, args_ in (
            ("rmsnorm", lambda bm, th: rmsnorm.rms_norm(M, N, 1e-6, bm, th, dtype=dtype),
             lambda: (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()), (x, w)),
            ("softmax", lambda bm, th: softmax.softmax(N, bm, th, dtype=dtype),
             lambda: torch.softmax(x.float(), -1), (x,)),
        ):
            best = None
            ref = ref_fn()
            for bm, th in ((1, 256), (1, 512), (2, 256), (4, 128)):
                try:
                    k = tegula.compile(build(bm, th), out_idx=[-1], target="cuda")
                    out = k(*args_)
                    err = rel_err(out, ref)
                    t = bench(lambda: k(*args_))
                    gbs = 2 * x.numel() * x.element_size() / t / 1e6
                    row = {"kernel": name, "dtype": dtype, "config": f"bm{bm}t{th}", "GB/s": gbs,
                           "copy_GB/s": copy_gbs, "frac_copy": gbs / copy_gbs, "rel_err": err}
                    print(row)
                    if err < 1e-2 and (best is None or gbs > best["GB/s"]):
                        best = row
                except Exception as e:
                    print(f"{name} {dtype} bm{bm}t{th}: {type(e).__name__}: {str(e)[:300]}")
            if best:
                rows.append(best)
    table("Memory-bound kernels at 8192x8192 vs copy bandwidth", rows,
          ["kernel", "dtype", "config", "GB/s", "copy_GB/s", "frac_copy", "rel_err"])
    return rows


@section("compile")
def compile_section(args):
    import gemm as ex
    import elementwise_add as ew
    from tegula import config

    rows = []
    with config.override(disable_cache=True):
        t0 = time.perf_counter()
        tegula.compile(ex.matmul.get_tir(4096, 4096, 4096), out_idx=[-1], target="cuda")
        cold = time.perf_counter() - t0
    tegula.compile(ex.matmul.get_tir(4096, 4096, 4096), out_idx=[-1], target="cuda")
    t0 = time.perf_counter()
    tegula.compile(ex.matmul.get_tir(4096, 4096, 4096), out_idx=[-1], target="cuda")
    cached = time.perf_counter() - t0
    k = tegula.compile(ew.elementwise_add(1, 128), out_idx=[-1], target="cuda")
    a = torch.randn(1, 128, device="cuda", dtype=torch.float16)
    b = torch.randn_like(a)
    for _ in range(100):
        k(a, b)
    torch.cuda.synchronize()
    n = 2000
    t0 = time.perf_counter()
    for _ in range(n):
        k(a, b)
    torch.cuda.synchronize()
    launch_us = (time.perf_counter() - t0) / n * 1e6
    rows.append({"cold_compile_s": cold, "cached_load_ms": cached * 1e3, "launch_us": launch_us})
    table("Compile and launch", rows, ["cold_compile_s", "cached_load_ms", "launch_us"])
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=None)
    p.add_argument("--quick", action="store_true")
    p.add_argument("--only", default="gemm,attention,memory,compile")
    args = p.parse_args()
    RESULTS.update({
        "date": datetime.date.today().isoformat(),
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "tegula": tegula.__version__,
    })
    try:
        import triton

        RESULTS["triton"] = triton.__version__
    except ImportError:
        pass
    for name in args.only.split(","):
        {"gemm": gemm_section, "attention": attention_section, "memory": memory_section,
         "compile": compile_section}[name](args)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(RESULTS, f, indent=1, default=str)


if __name__ == "__main__":
    main()
