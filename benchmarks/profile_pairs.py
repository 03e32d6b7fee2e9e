"""One kernel, built by tegula or by TileLang 0.1.15 from the same source, run once inside an NVTX
range ``prof`` so that a profiler can pick that launch alone; its CUDA source is written beside.

    ncu --nvtx --nvtx-include "prof/" --set full --clock-control none -o OUT/CASE-FW \\
        python benchmarks/profile_pairs.py CASE tegula|tilelang OUTDIR

CASE: attn128, attn128c (flash attention fwd d128, 4x16x4096, causal), attn64, attn128-tma,
attn128c-tma and attn128c-ws (tegula's two forms of the softmax overlap), attn128-pp and
attn128-nopp (ping-pong of the consumer warpgroups on and off), gemm16 (fp16
4096^3, 128x256x64, 3 stages, 256 threads), gemm16-8192 (the same at 8192^3), or a case of bench_corpus.py (mla_decode, gemv, ...).
``benchmarks/run_profile_device.sh`` runs it for a list of cases on the GPU.
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

HOPPER = {
    "attn128": dict(dim=128, causal=False), "attn128c": dict(dim=128, causal=True),
    "attn64": dict(dim=64, causal=False), "attn64c": dict(dim=64, causal=True),
    # tegula's two forms of the softmax overlap, whichever the default takes: TmaPipeline's
    # (no WarpSpecialize) and the warp-specialized one
    "attn128-tma": dict(dim=128, causal=False, configs={"tl.disable_warp_specialized": True}),
    "attn128c-ws": dict(dim=128, causal=True, configs={"tegula.warp_specialize": True}),
    "attn128c-tma": dict(dim=128, causal=True, configs={"tl.disable_warp_specialized": True}),
}


def _source(kernel) -> str:
    for name in ("get_kernel_source", "source"):
        f = getattr(kernel, name, None)
        if f is not None:
            try:
                return f() if callable(f) else str(f)
            except Exception as e:  # noqa: BLE001 - keep going: the profile matters more
                return f"// source unavailable: {type(e).__name__}: {e}"
    return "// no source accessor"


def hopper_case(case: str, fw: str):
    import bench_hopper as bh

    if fw == "tilelang":
        import tilelang

    if case in ("gemm16", "gemm16-8192"):
        n = 8192 if case == "gemm16-8192" else 4096
        a = torch.randn(n, n, device="cuda", dtype=torch.float16)
        b = torch.randn(n, n, device="cuda", dtype=torch.float16)
        cfg = (128, 256, 64, 3, 256)
        if fw == "tegula":
            import gemm as ex
            import tegula

            k = tegula.compile(ex.matmul.get_tir(n, n, n, *cfg, dtype="float16"), out_idx=[-1], target="cuda")
        else:
            k = bh.tilelang_example("gemm").matmul(n, n, n, *cfg, dtype="float16")
        return k, (a, b), lambda: a @ b
    spec = HOPPER[case]
    dim, causal = spec["dim"], spec["causal"]
    batch, heads, seq = (4, 16, 4096) if dim == 128 else (4, 32, 4096)
    q = torch.randn(batch, heads, seq, dim, device="cuda", dtype=torch.float16)
    kk, v = torch.randn_like(q), torch.randn_like(q)
    cfg = (128, 128, 2, 256)
    if fw == "tegula":
        import flash_attention as ex
        import tegula

        k = tegula.compile(ex.flash_attention(batch, heads, seq, dim, causal, 1, *cfg), out_idx=[-1], target="cuda",
                           pass_configs=spec.get("configs"))
    else:
        k = tilelang.compile(bh.tilelang_example("flash_attention").flash_attention(batch, heads, seq, dim, causal, 1, *cfg),
                             out_idx=[-1])
    ref = lambda: torch.nn.functional.scaled_dot_product_attention(q, kk, v, is_causal=causal)  # noqa: E731
    return k, (q, kk, v), ref


def corpus_case(case: str, fw: str):
    import bench_corpus as bc

    (c,) = [x for x in bc.CASES if x.key == case]
    bc.use_tegula() if fw == "tegula" else bc.use_tilelang()
    corpus = bc.Corpus(bc.default_corpus())
    mod = corpus.load(c.directory, c.module)
    if c.key == "dequant_gemm":
        bc._FP4_REF["convert"] = mod.torch_convert
    k = c.build(mod)
    ins = c.inputs()
    return k, ins, (lambda: c.reference(mod, ins)), (lambda: c.run(k, ins))


def main() -> None:
    case, fw, out = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    out.mkdir(parents=True, exist_ok=True)
    if case in HOPPER or case.startswith("gemm16"):
        k, ins, ref = hopper_case(case, fw)
        run = lambda: k(*ins)  # noqa: E731
    else:
        k, ins, ref, run = corpus_case(case, fw)
    (out / f"{case}-{fw}.cu").write_text(_source(k))
    o = run()
    o = o[0] if isinstance(o, (tuple, list)) else o
    r = ref()
    err = ((o.double() - r.double()).norm() / r.double().norm()).item()
    for _ in range(2):
        run()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(10):
        run()
    end.record()
    torch.cuda.synchronize()
    ms = start.elapsed_time(end) / 10
    torch.cuda.nvtx.range_push("prof")
    run()
    torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    print(f"RESULT {case} {fw} rel_err={err:.2e} ms={ms:.4f}")


if __name__ == "__main__":
    main()
