"""GEMM variants at one large shape in interleaved rounds (each round times every kernel once,
``do_bench`` median; the table gives the median over rounds, min and max): the block order (strip
widths of ``T.use_swizzle``'s rasterization, launch order), tile shapes and stages, cuBLAS and
TileLang from the same source, and the same kernel at a short K to separate the per-tile cost
that does not grow with K (launch, pipeline fill, epilogue) from the k-loop.

    python benchmarks/gemm_candidates.py [--n 8192] [--rounds 3] [--dtype float16] [--out results.json]
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import torch  # noqa: E402

import tegula  # noqa: E402
from tegula.ir.stmt import Kernel  # noqa: E402
from tegula.ir.visitor import Mutator  # noqa: E402
from bench_cuda import bench, rel_err  # noqa: E402
from bench_hopper import tilelang_example  # noqa: E402


def with_panel(func, panel: int):
    """``func`` with its kernel's rasterization strip set to ``panel`` columns (0: launch order)."""

    class M(Mutator):
        def visit_Kernel(self, k: Kernel) -> Kernel:
            ann = {key: v for key, v in k.annotations.items() if key != "swizzle"}
            if panel:
                ann["swizzle"] = (panel, "row")
            return dataclasses.replace(k, annotations=ann)

    return M().visit(func)


def main() -> None:
    import gemm as ex

    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=8192)
    p.add_argument("--short-k", type=int, default=1024)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--dtype", default="float16")
    p.add_argument("--panels", default="4,8,16,0")
    p.add_argument("--pass-configs", default="", help="extra tegula variants: label=key:value[,key:value];...")
    p.add_argument("--out", default="")
    args = p.parse_args()
    n, dtype = args.n, args.dtype
    tdt = getattr(torch, dtype)
    a = torch.randn(n, n, device="cuda", dtype=tdt)
    b = torch.randn(n, n, device="cuda", dtype=tdt)
    b_short = torch.randn(args.short_k, n, device="cuda", dtype=tdt)
    a_short = torch.randn(n, args.short_k, device="cuda", dtype=tdt)
    ref, ref_short = a.float() @ b.float(), a_short.float() @ b_short.float()
    base = (128, 256, 64, 3, 256)

    def build(cfg=base, K=n, panel=None, pc=None):
        f = ex.matmul.get_tir(n, n, K, *cfg, dtype=dtype)
        if panel is not None:
            f = with_panel(f, panel)
        return tegula.compile(f, out_idx=[-1], target="cuda", pass_configs=pc)

    variants = {"cublas": (lambda: a @ b, None, n ** 3),
                "tegula default (panel 10)": (build(), (a, b, ref), n ** 3)}
    for panel in (int(x) for x in args.panels.split(",") if x):
        variants[f"tegula panel {panel or 'launch order'}"] = (build(panel=panel), (a, b, ref), n ** 3)
    variants["tegula 256x128x64x3"] = (build((256, 128, 64, 3, 256)), (a, b, ref), n ** 3)
    variants["tegula 128x256x64x4"] = (build((128, 256, 64, 4, 256)), (a, b, ref), n ** 3)
    for spec in filter(None, args.pass_configs.split(";")):
        label, kv = spec.split("=", 1)
        pc = {k: (v == "1" if v in ("0", "1") else v) for k, v in (x.split(":") for x in kv.split(","))}
        variants[f"tegula {label}"] = (build(pc=pc), (a, b, ref), n ** 3)
    variants[f"tegula K={args.short_k}"] = (build(K=args.short_k), (a_short, b_short, ref_short), n * n * args.short_k)
    tl_ex = tilelang_example("gemm")
    if tl_ex is not None:
        variants["tilelang"] = (tl_ex.matmul(n, n, n, *base, dtype=dtype), (a, b, ref), n ** 3)
        variants[f"tilelang K={args.short_k}"] = (tl_ex.matmul(n, n, args.short_k, *base, dtype=dtype),
                                                  (a_short, b_short, ref_short), n * n * args.short_k)
    fns = {}
    for name, (k, io, work) in variants.items():
        if io is None:
            fns[name] = (k, work)
            continue
        x, y, want = io
        err = rel_err(k(x, y), want)
        print(f"{name}: rel err {err:.2e}")
        assert err < 1e-2, (name, err)
        fns[name] = ((lambda k=k, x=x, y=y: k(x, y)), work)
    times: dict = {name: [] for name in fns}
    for _ in range(args.rounds):
        for name, (fn, work) in fns.items():
            times[name].append(bench(fn))
    rows = []
    for name, ts in times.items():
        work = fns[name][1]
        tf = [2 * work / t / 1e9 for t in ts]
        rows.append({"kernel": name, "ms_median": statistics.median(ts), "tflops_median": statistics.median(tf),
                     "tflops_min": min(tf), "tflops_max": max(tf), "ms_rounds": ts})
        print(f"{name:34s} {statistics.median(ts):8.4f} ms  median {statistics.median(tf):7.1f}  "
              f"min {min(tf):7.1f}  max {max(tf):7.1f} TFLOP/s")
    if args.out:
        Path(args.out).write_text(json.dumps({"device": torch.cuda.get_device_name(0), "n": n, "dtype": dtype,
                                              "rounds": args.rounds, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
