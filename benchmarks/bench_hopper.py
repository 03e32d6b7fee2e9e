"""Hopper (sm_90a) benchmarks: tegula's wgmma path next to its mma.sync path, cuBLAS / SDPA and,
when importable, TileLang built from the same example source, in one process on one GPU.

    python benchmarks/bench_hopper.py [--out results.json] [--quick] [--only gemm,attention,compile]

Every tegula and TileLang result is checked against torch (relative error) before it is timed;
inputs are fresh random numbers. Timing is the median of triton.testing.do_bench (CUDA events),
one kernel after the other; ``--rounds N`` adds N interleaved rounds of every label's best kernel
beside cuBLAS (GEMM) or cuDNN and flash SDPA (attention): each round times each once, the median is
the ``_rounds`` column, the first timing stays in its own.
Ratios are peer time / tegula time: above 1, tegula is faster.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import time
import traceback
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

import tegula  # noqa: E402
from tegula.passconfig import PassConfigKey  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_cuda import bench, rel_err, table  # noqa: E402

RESULTS: dict = {"sections": {}}
# the sm_80 path on the same GPU (mma.sync, cp.async), and wgmma without TMA
MMA_SYNC = {PassConfigKey.TEGULA_DISABLE_WGMMA: True, PassConfigKey.TL_DISABLE_TMA_LOWER: True}
NO_TMA = {PassConfigKey.TL_DISABLE_TMA_LOWER: True}
OVERLAP = {PassConfigKey.TEGULA_WGMMA_OVERLAP: True}
# the sm_90a default without the WarpSpecialize pass (TMA loads issued by the computing threads)
NO_WS = {PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True}
# producer and consumer warpgroups with the consumers waiting for each k-tile's wgmma (TileLang's form)
WS_PLAIN = {PassConfigKey.TEGULA_WARP_SPECIALIZE: True, PassConfigKey.TEGULA_WGMMA_OVERLAP: False}
# attention as before the softmax overlap and OrderBlocks (the second gemm waited for in each
# iteration, query blocks in index order), and with the overlap but blocks in order
BEFORE_OVERLAP = {PassConfigKey.TEGULA_SOFTMAX_OVERLAP: False, PassConfigKey.TEGULA_DISABLE_BLOCK_ORDER: True}
NO_BLOCK_ORDER = {PassConfigKey.TEGULA_DISABLE_BLOCK_ORDER: True}
# the other two of the four combinations of the softmax overlap and OrderBlocks: overlap off with
# the blocks reordered (TmaPipeline without the overlap), and TmaPipeline's overlap (no split)
# with the blocks in order
NO_OVERLAP = {PassConfigKey.TEGULA_SOFTMAX_OVERLAP: False}
TMA_NO_ORDER = {PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True, PassConfigKey.TEGULA_DISABLE_BLOCK_ORDER: True}
# the default with Q loaded by the producer warpgroup through TMA in split attention (off by default, unmeasured)
WS_TMA_PROLOGUE = {PassConfigKey.TEGULA_WS_TMA_PROLOGUE: True}
# attention's softmax overlap in warp-specialized form (a TMA producer warpgroup, K and V rings,
# consumers without a block barrier), forced on at every head dim
WS_OVERLAP = {PassConfigKey.TEGULA_WARP_SPECIALIZE: True, PassConfigKey.TEGULA_SOFTMAX_OVERLAP: True}
# the accumulator stored from registers (TmaStores' fragment form off: the default before it)
NO_TMA_STORE = {PassConfigKey.TEGULA_TMA_STORE: False}


def tilelang_example(name: str):
    """The example module ``name`` built by TileLang instead of tegula (same source), or None."""
    try:
        import tilelang  # noqa: F401
    except Exception as e:  # not on this machine
        print(f"TileLang unavailable: {type(e).__name__}: {e}")
        return None
    src = (ROOT / "examples" / f"{name}.py").read_text()
    src = src.replace("import tegula as tilelang", "import tilelang").replace(
        "import tegula.language as T", "import tilelang.language as T")
    # TileLang resolves annotation names through the closure: spell the attention shapes out
    src = src.replace("T.Tensor(q_shape, dtype)", "T.Tensor((batch, heads, seq_len, dim), dtype)").replace(
        "T.Tensor(kv_shape, dtype)", "T.Tensor((batch, heads // groups, seq_len, dim), dtype)")
    mod = types.ModuleType(f"tl_{name}")
    mod.__file__ = str(ROOT / "examples" / f"{name}.py")
    exec(compile(src, mod.__file__, "exec"), mod.__dict__)
    return mod


def _try(label, fn):
    try:
        return fn()
    except Exception as e:
        print(f"{label}: {type(e).__name__}: {str(e)[:400]}")
        return None


def gemm_section(args):
    import gemm as ex

    tl_ex = tilelang_example("gemm") if not args.no_tilelang else None
    rows = []
    sizes = [4096] if args.quick else [4096, 8192]
    wg_configs = [(128, 256, 64, 3, 256), (128, 256, 64, 4, 256), (256, 128, 64, 3, 256), (256, 128, 64, 4, 256),
                  (128, 128, 64, 3, 256), (128, 256, 32, 4, 256)]
    if args.configs:
        wg_configs = wg_configs[:args.configs]
    mma_configs = [(128, 256, 32, 3, 256), (128, 128, 32, 3, 128)]
    tl_configs = [(128, 256, 64, 3, 256)]
    shapes = [(n, n, n) for n in sizes] + [(64, 8192, 8192)]
    for dtype in ("float16", "bfloat16"):
        tdt = getattr(torch, dtype)
        for (M, N, K) in shapes:
            a = torch.randn(M, K, device="cuda", dtype=tdt)
            b = torch.randn(K, N, device="cuda", dtype=tdt)
            ref = (a.double() @ b.double()) if M * N * K <= 4096 ** 3 else (a.float() @ b.float()).double()
            t_cublas = bench(lambda: a @ b)
            flops = 2 * M * N * K
            row = {"dtype": dtype, "shape": f"{M}x{N}x{K}", "cublas_tflops": flops / t_cublas / 1e9}
            chosen: dict = {}  # label -> its best kernel, for the interleaved rounds
            cfgs = wg_configs if M > 64 else [(64, 128, 64, 4, 128), (64, 256, 64, 3, 128)]
            for label, configs, build in (
                ("wgmma", cfgs, lambda c: tegula.compile(ex.matmul.get_tir(M, N, K, *c, dtype=dtype), out_idx=[-1], target="cuda")),
                ("no_tma_store", cfgs[:2], lambda c: tegula.compile(ex.matmul.get_tir(M, N, K, *c, dtype=dtype),
                                                                     out_idx=[-1], target="cuda",
                                                                     pass_configs=NO_TMA_STORE)),
                ("no_ws", cfgs, lambda c: tegula.compile(ex.matmul.get_tir(M, N, K, *c, dtype=dtype), out_idx=[-1],
                                                         target="cuda", pass_configs=NO_WS)),
                ("ws_plain", cfgs[:2], lambda c: tegula.compile(ex.matmul.get_tir(M, N, K, *c, dtype=dtype), out_idx=[-1],
                                                                target="cuda", pass_configs=WS_PLAIN)),
                # the default overlaps the large tiles already; M = 64: the split with the overlap
                ("wgmma_overlap", [] if M > 64 else cfgs[:1],
                 lambda c: tegula.compile(ex.matmul.get_tir(M, N, K, *c, dtype=dtype), out_idx=[-1], target="cuda",
                                          pass_configs=OVERLAP)),
                ("wgmma_cpasync", cfgs[:3], lambda c: tegula.compile(ex.matmul.get_tir(M, N, K, *c, dtype=dtype), out_idx=[-1],
                                                                     target="cuda", pass_configs=NO_TMA)),
                ("mma_sync", mma_configs if M > 64 else [(64, 128, 32, 3, 128)],
                 lambda c: tegula.compile(ex.matmul.get_tir(M, N, K, *c, dtype=dtype), out_idx=[-1], target="cuda",
                                          pass_configs=MMA_SYNC)),
                ("tilelang", tl_configs if M > 64 else [(64, 128, 64, 3, 128)],
                 lambda c: tl_ex.matmul(M, N, K, *c, dtype=dtype)),
            ):
                if label == "tilelang" and tl_ex is None or label in args.skip or \
                        (label in EXTRA and label not in args.extra):
                    continue
                best = None
                for c in configs:
                    k = _try(f"{label} {dtype} {M}x{N}x{K} {c}", lambda: build(c))
                    if k is None:
                        continue
                    out = k(a, b)
                    err = rel_err(out, ref)
                    t = bench(lambda: k(a, b))
                    print(f"  {label:9s} {dtype} {M}x{N}x{K} {c}: {flops / t / 1e9:7.1f} TFLOP/s err {err:.2e}")
                    if err < 1e-2 and (best is None or t < best[0]):
                        best = (t, c, err, k)
                if best:
                    row[f"{label}_tflops"] = flops / best[0] / 1e9
                    row[f"{label}_config"] = "x".join(map(str, best[1]))
                    row[f"{label}_err"] = best[2]
                    chosen[label] = best[3]
            if args.rounds:
                _rounds(row, args.rounds, flops, {"cublas": lambda: a @ b,
                                                  **{lb: (lambda k=k: k(a, b)) for lb, k in chosen.items()}})
            w = row.get("wgmma_tflops")
            if w:
                row["wgmma_vs_cublas"] = w / row["cublas_tflops"]
                if row.get("tilelang_tflops"):
                    row["wgmma_vs_tilelang"] = w / row["tilelang_tflops"]
                if row.get("mma_sync_tflops"):
                    row["wgmma_vs_mma_sync"] = w / row["mma_sync_tflops"]
                if row.get("no_ws_tflops"):
                    row["wgmma_vs_no_ws"] = w / row["no_ws_tflops"]
                if row.get("ws_plain_tflops"):
                    row["wgmma_vs_ws_plain"] = w / row["ws_plain_tflops"]
                if row.get("no_tma_store_tflops"):
                    row["wgmma_vs_no_tma_store"] = w / row["no_tma_store_tflops"]
            rows.append(row)
            print(row)
    table("GEMM (TFLOP/s)", rows, ["dtype", "shape", "cublas_tflops", "tilelang_tflops", "mma_sync_tflops",
                                   "wgmma_cpasync_tflops", "no_ws_tflops", "ws_plain_tflops", "wgmma_tflops", "wgmma_config",
                                   "no_tma_store_tflops", "no_tma_store_config",
                                   "wgmma_overlap_tflops",
                                   "wgmma_overlap_config",
                                   "wgmma_vs_cublas", "wgmma_vs_tilelang"])
    if args.rounds:
        table(f"GEMM, interleaved rounds (median of {args.rounds}; TFLOP/s)", rows,
              ["dtype", "shape"] + [f"{lb}_rounds_tflops" for lb in ("cublas", "tilelang", "wgmma",
                                                                      "no_tma_store", "no_ws", "ws_plain")])
    return rows


def _rounds(row: dict, rounds: int, flops: float, fns: dict) -> None:
    """Time every kernel of ``fns`` once per round, ``rounds`` times (drifts of the GPU's clocks and
    power reach all of them alike); the median and every round's TFLOP/s go into ``row``."""
    times: dict = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            times[name].append(bench(fn))
    for name, ts in times.items():
        row[f"{name}_rounds_tflops"] = flops / statistics.median(ts) / 1e9
        row[f"{name}_rounds"] = [round(flops / t / 1e9, 1) for t in ts]


# attention's labels: tegula built with these pass configurations, in this order (None: the default)
ATTENTION_LABELS = {"wgmma": None, "no_ws": NO_WS, "ws_overlap": WS_OVERLAP, "before_overlap": BEFORE_OVERLAP,
                    "no_block_order": NO_BLOCK_ORDER, "no_overlap": NO_OVERLAP, "tma_no_order": TMA_NO_ORDER,
                    "ws_tma_prologue": WS_TMA_PROLOGUE,
                    "wgmma_cpasync": NO_TMA, "mma_sync": MMA_SYNC}
# labels about the block order, its combinations and the overlap's split form, timed on causal shapes only
CAUSAL_ONLY = ("no_block_order", "no_overlap", "tma_no_order", "ws_overlap")
# labels timed at d128 only (where attention is split by default)
D128_ONLY = ("ws_tma_prologue",)
# labels timed only when --extra names them (the rest of the four combinations of the softmax
# overlap and the block order, measured on 2026-12-01: BENCHMARKS.md)
EXTRA = ("no_overlap", "tma_no_order")


def attention_section(args):
    import flash_attention as ex
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    tl_ex = tilelang_example("flash_attention") if not args.no_tilelang else None
    rows = []
    for seq, dim, causal in [(s, d, c) for s in args.attn_seq for d in (64, 128) for c in (False, True)]:
        if True:
            batch, heads = ((4, 32) if dim == 64 else (4, 16)) if seq <= 4096 else ((1, 32) if dim == 64 else (1, 16))
            q = torch.randn(batch, heads, seq, dim, device="cuda", dtype=torch.float16)
            k_, v = torch.randn_like(q), torch.randn_like(q)
            ref = F.scaled_dot_product_attention(q, k_, v, is_causal=causal)
            flops = 4 * batch * heads * seq * seq * dim * (0.5 if causal else 1.0)
            row = {"dim": dim, "causal": causal, "shape": f"{batch}x{heads}x{seq}"}
            chosen: dict = {}  # label -> a function running its best kernel, for the interleaved rounds
            for name, be in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
                def sdpa(be=be):
                    with sdpa_kernel([be]):
                        return F.scaled_dot_product_attention(q, k_, v, is_causal=causal)
                t = _try(f"sdpa {name}", lambda: bench(sdpa))
                if t:
                    row[f"{name}_tflops"] = flops / t / 1e9
                    chosen[name] = sdpa
            configs = [(128, 128, 2, 256), (128, 64, 2, 128), (128, 128, 2, 128), (128, 128, 3, 256)]
            if args.configs:
                configs = configs[:1] + configs[2:][:args.configs - 1]
            if args.attn_configs:
                configs = [tuple(int(x) for x in c.split("x")) for c in args.attn_configs.split(",")]
            def ours(pc):
                return lambda c: tegula.compile(ex.flash_attention(batch, heads, seq, dim, causal, 1, *c), out_idx=[-1],
                                                target="cuda", pass_configs=pc)

            for label, build in (
                *((lb, ours(pc)) for lb, pc in ATTENTION_LABELS.items()),
                ("tilelang", lambda c: tl_ex.flash_attention(batch, heads, seq, dim, causal, 1, *c)),
            ):
                if label in args.skip or (label in CAUSAL_ONLY and not causal) or \
                        (label in EXTRA and label not in args.extra) or (label in D128_ONLY and dim != 128):
                    continue
                if label == "tilelang":
                    if tl_ex is None:
                        continue
                    cs = configs[:1]
                else:
                    cs = configs
                best = None
                for c in cs:
                    kern = _try(f"{label} attn d{dim} causal={causal} {c}", lambda: build(c))
                    if kern is None:
                        continue
                    if label == "tilelang":
                        import tilelang

                        kern = _try("tilelang compile", lambda: tilelang.compile(kern, out_idx=[-1]))
                        if kern is None:
                            continue
                    o = kern(q, k_, v)
                    err = rel_err(o, ref)
                    t = bench(lambda: kern(q, k_, v))
                    print(f"  {label:18s} attn d{dim} causal={causal} {c}: {flops / t / 1e9:7.1f} TFLOP/s err {err:.2e}")
                    if err < 1e-2 and (best is None or t < best[0]):
                        best = (t, c, kern)
                if best:
                    row[f"{label}_tflops"] = flops / best[0] / 1e9
                    row[f"{label}_config"] = "x".join(map(str, best[1]))
                    chosen[label] = lambda kern=best[2]: kern(q, k_, v)
            if args.rounds:
                _rounds(row, args.rounds, flops, chosen)
                if row.get("tilelang_rounds_tflops") and row.get("wgmma_rounds_tflops"):
                    row["wgmma_vs_tilelang_rounds"] = row["wgmma_rounds_tflops"] / row["tilelang_rounds_tflops"]
            rows.append(row)
            print(row)
    table("Flash attention forward (TFLOP/s)", rows, ["shape", "dim", "causal", "cudnn_tflops", "flash_tflops",
                                                      "tilelang_tflops", "mma_sync_tflops", "wgmma_cpasync_tflops",
                                                      "no_ws_tflops", "before_overlap_tflops", "no_block_order_tflops",
                                                      "no_overlap_tflops", "tma_no_order_tflops", "ws_tma_prologue_tflops", "wgmma_tflops",
                                                      "wgmma_config", "ws_overlap_tflops", "ws_overlap_config"])
    if args.rounds:
        table(f"Flash attention forward, interleaved rounds (median of {args.rounds}; TFLOP/s)", rows,
              ["shape", "dim", "causal"] + [f"{lb}_rounds_tflops" for lb in ("cudnn", "flash", "tilelang", "wgmma")]
              + ["wgmma_vs_tilelang_rounds"])
    return rows


def fp8_section(args):
    """FP8 GEMM (e4m3 x e4m3 -> bf16, float32 accumulation) against torch._scaled_mm: the plain
    kernel (examples/gemm_fp8.py) over the tile configurations, then at the best one without
    RasterBlocks and with other strip widths, the periodic promotion (2xAcc) by default and
    without WarpSpecialize, the fused epilogue (row and column scales, bias, SiLU or ReLU), and
    ``torch._scaled_mm`` once more at the end (its spread between the two is the run's noise)."""
    import gemm_fp8 as ex

    def lazy(*a, pass_configs=None, **kw):
        return tegula.compile(ex.matmul_fp8.__wrapped__(*a, **kw), out_idx=[-1], target="cuda", pass_configs=pass_configs)

    rows = []
    configs = [(128, 256, 128, 4, 256), (128, 256, 128, 3, 256), (256, 128, 128, 3, 256), (128, 128, 128, 4, 256)]
    configs = configs[:args.configs] if args.configs else configs
    promote_configs = [(128, 128, 128, 4, 256), (128, 192, 128, 4, 256)]
    one = torch.tensor(1.0, device="cuda")
    for n in ([4096] if args.quick else [4096, 8192]):
        a = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
        b = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
        ref = (a.double() @ b.double().T)
        flops = 2 * n ** 3
        row = {"shape": f"{n}^3"}
        t = _try("torch._scaled_mm", lambda: bench(lambda: torch._scaled_mm(a, b.t(), one, one, out_dtype=torch.bfloat16)))
        if t:
            row["scaled_mm_tflops"] = flops / t / 1e9

        def timed(label, cfg, inputs=(a, b), want=ref, pc=None, **kw):
            k = _try(f"fp8 {n} {label} {cfg}", lambda: lazy(n, n, n, *cfg, pass_configs=pc, **kw))
            if k is None:
                return None
            err = rel_err(k(*inputs), want)
            if err >= 1e-2:
                print(f"  fp8 {n} {label} {cfg}: WRONG, relative error {err:.2e}")
                return None
            tk = flops / bench(lambda: k(*inputs)) / 1e9
            print(f"  fp8 {n} {label} {cfg}: {tk:7.1f} TFLOP/s err {err:.2e}")
            return tk

        def best_of(label, cfgs, **kw):
            got = [(tk, c) for c in cfgs for tk in [timed(label, c, **kw)] if tk]
            if got:
                tk, c = max(got)
                row[f"{label}_tflops"], row[f"{label}_config"] = tk, "x".join(map(str, c))
                return c
            return None

        best = best_of("tegula", configs)
        if best and row.get("scaled_mm_tflops"):
            row["vs_scaled_mm"] = row["tegula_tflops"] / row["scaled_mm_tflops"]
        for label, pc in (("no_raster", {PassConfigKey.TEGULA_BLOCK_RASTER: 0}), ("no_ws", NO_WS),
                          *((f"raster_{p}", {PassConfigKey.TEGULA_BLOCK_RASTER: p}) for p in args.fp8_panels)):
            if best and label not in args.skip:
                tk = timed(label, best, pc=pc)
                if tk:
                    row[f"{label}_tflops"] = tk
        if "promote" not in args.skip:  # 2xAcc: one promotion per 128 elements of K
            best_of("promote", promote_configs, promote=1)
            best_of("promote_no_ws", promote_configs, promote=1, pc={PassConfigKey.TEGULA_WARP_SPECIALIZE: False})
        if best and "epilogue" not in args.skip:
            # dequantization scales as real models have them (products of order 1 after the
            # scales): SiLU on outputs of order sqrt(K) would time the float division's slow path
            sa = (torch.rand(n, device="cuda") + 0.5) / n ** 0.5
            sb = torch.rand(n, device="cuda") + 0.5
            bias = torch.randn(n, device="cuda")
            v = ref * sa.double()[:, None] * sb.double()[None, :] + bias.double()[None, :]
            for label, act, want in (("epilogue", "silu", v * torch.sigmoid(v)), ("epilogue_relu", "relu", v.clamp_min(0))):
                if label not in args.skip:
                    tk = timed(label, best, inputs=(a, b, sa, sb, bias), want=want, scale_rows=True, scale_cols=True,
                               bias=True, activation=act)
                    if tk:
                        row[f"{label}_tflops"] = tk
        t = _try("torch._scaled_mm", lambda: bench(lambda: torch._scaled_mm(a, b.t(), one, one, out_dtype=torch.bfloat16)))
        if t:
            row["scaled_mm_again_tflops"] = flops / t / 1e9
        rows.append(row)
        print(row)
    table("FP8 GEMM (TFLOP/s)", rows, ["shape", "scaled_mm_tflops", "tegula_tflops", "tegula_config", "vs_scaled_mm",
                                       "no_raster_tflops", "no_ws_tflops", "promote_tflops", "promote_config",
                                       "promote_no_ws_tflops", "epilogue_tflops", "epilogue_relu_tflops",
                                       "scaled_mm_again_tflops"])
    return rows


def compile_section(args):
    """Cold compile (cache off) of each kernel family of the tables on its default sm_90a path, and
    the GEMM on each older path: the bar is one second per kernel."""
    import flash_attention as fa
    import gemm as ex
    import gemm_fp8 as f8
    from tegula import config

    def gemm():
        return ex.matmul.get_tir(4096, 4096, 4096, 128, 256, 64, 3, 256)

    paths = [("wgmma+tma+ws", {}), ("wgmma+tma", NO_WS), ("wgmma", NO_TMA), ("mma_sync", MMA_SYNC)]
    cases = [("gemm 128x256x64x3", gemm, path, pc) for path, pc in paths]
    cases += [("attention d128 causal 128x128x2", lambda: fa.flash_attention(4, 16, 4096, 128, True, 1, 128, 128, 2, 256),
               "default", {}),
              ("attention d128 128x128x2", lambda: fa.flash_attention(4, 16, 4096, 128, False, 1, 128, 128, 2, 256),
               "default", {}),
              ("fp8 e4m3 128x256x128x3", lambda: f8.matmul_fp8.__wrapped__(8192, 8192, 8192, 128, 256, 128, 3, 256),
               "default", {})]
    with config.override(disable_cache=True):  # untimed: NVRTC's and the modules' first load
        _try("compile warm-up", lambda: tegula.compile(gemm(), out_idx=[-1], target="cuda"))
    rows = []
    for name, make, path, pc in cases:
        with config.override(disable_cache=True):
            t0 = time.perf_counter()
            kern = _try(f"compile {name} {path}",
                        lambda: tegula.compile(make(), out_idx=[-1], target="cuda", pass_configs=pc))
            if kern is not None:
                rows.append({"kernel": name, "path": path, "cold_compile_s": time.perf_counter() - t0})
    table("Cold compile (s)", rows, ["kernel", "path", "cold_compile_s"])
    return rows


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", default="")
    p.add_argument("--quick", action="store_true")
    p.add_argument("--no-tilelang", action="store_true")
    p.add_argument("--only", default="gemm,attention,fp8,compile")
    p.add_argument("--skip", default="", help="labels left out, e.g. mma_sync,wgmma_cpasync")
    p.add_argument("--extra", default="", help="labels timed only on request: " + ",".join(EXTRA))
    p.add_argument("--configs", type=int, default=0, help="try only the first N configurations")
    p.add_argument("--rounds", type=int, default=0,
                   help="then time each label's best kernel beside cuBLAS / SDPA in N interleaved rounds (median)")
    p.add_argument("--attn-seq", default="4096", help="attention sequence lengths (16384: batch 1)")
    p.add_argument("--fp8-panels", default="", help="FP8: RasterBlocks strip widths to try beside the default")
    p.add_argument("--attn-configs", default="", help="attention configurations, e.g. 128x128x2x256,128x128x3x256")
    args = p.parse_args()
    args.skip = set(filter(None, args.skip.split(",")))
    args.extra = set(filter(None, args.extra.split(",")))
    args.attn_seq = [int(x) for x in args.attn_seq.split(",")]
    args.fp8_panels = [int(x) for x in args.fp8_panels.split(",") if x]
    RESULTS["device"] = torch.cuda.get_device_name(0)
    RESULTS["date"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    from tegula.backends.cuda.compiler import detect_arch

    RESULTS["arch"] = detect_arch()
    sections = {"gemm": gemm_section, "attention": attention_section, "compile": compile_section,
                "fp8": fp8_section}
    for name in args.only.split(","):
        t0 = time.time()
        try:
            RESULTS["sections"][name] = {"rows": sections[name](args), "seconds": time.time() - t0}
        except Exception as e:  # a failing section must not hide the others
            traceback.print_exc()
            RESULTS["sections"][name] = {"error": f"{type(e).__name__}: {e}"[:2000]}
        if args.out:  # after every section, so a run cut short keeps what it measured
            Path(args.out).write_text(json.dumps(RESULTS, indent=1, default=str))
    print(json.dumps({k: v for k, v in RESULTS.items() if k != "sections"}))


if __name__ == "__main__":
    main()
