"""Is a kernel's fast mode its own or the GPU's? Flash attention forward (fp16, one shape, 128x128
tiles, 2 stages, 256 threads) built by TileLang 0.1.15 and by tegula (its default and a few pass
configurations), timed in interleaved rounds: each round times every kernel once (the order turned
round every other round), with the GPU's clocks, power and temperature read before each timing;
then each kernel on fresh input tensors at other addresses.

    PYTHONPATH=/tmp/site:$PWD python benchmarks/attn_modes.py --out modes.json [--rounds 10]
        [--dim 128] [--causal] [--labels default,ws_plain,no_ws]

If the peers' fast timings come in the same rounds as tegula's fast ones, the GPU (clocks, power)
moved both; if only one kernel has them, the mode is that kernel's.
"""
from __future__ import annotations

import argparse
import datetime
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

import tegula  # noqa: E402
from tegula.passconfig import PassConfigKey  # noqa: E402
from bench_cuda import bench, rel_err  # noqa: E402

LABELS = {
    "default": None,
    # producer and consumer warpgroups, the consumers waiting for each gemm (TileLang's schedule)
    "ws_plain": {PassConfigKey.TEGULA_WARP_SPECIALIZE: True, PassConfigKey.TEGULA_SOFTMAX_OVERLAP: False},
    # TmaPipeline's softmax overlap, no producer warpgroup
    "no_ws": {PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True},
}
SMI = "clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active"


def gpu_state() -> str:
    try:
        return subprocess.run(["nvidia-smi", f"--query-gpu={SMI}", "--format=csv,noheader"], capture_output=True,
                              text=True, timeout=10).stdout.strip()
    except Exception as e:  # noqa: BLE001
        return f"n/a {type(e).__name__}"


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--out", default="")
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--causal", action="store_true")
    p.add_argument("--labels", default="default,ws_plain,no_ws")
    p.add_argument("--addresses", type=int, default=4, help="fresh input sets timed after the rounds")
    args = p.parse_args()
    import flash_attention as ex
    import bench_hopper as bh

    dim, causal = args.dim, args.causal
    batch, heads, seq = (4, 16, 4096) if dim == 128 else (4, 32, 4096)
    cfg = (128, 128, 2, 256)
    flops = 4 * batch * heads * seq * seq * dim * (0.5 if causal else 1.0)
    q = torch.randn(batch, heads, seq, dim, device="cuda", dtype=torch.float16)
    k_, v = torch.randn_like(q), torch.randn_like(q)
    ref = torch.nn.functional.scaled_dot_product_attention(q, k_, v, is_causal=causal)
    kernels = {}
    for label in args.labels.split(","):
        try:
            kernels[label] = tegula.compile(ex.flash_attention(batch, heads, seq, dim, causal, 1, *cfg), out_idx=[-1],
                                            target="cuda", pass_configs=LABELS[label])
        except Exception as e:  # noqa: BLE001
            print(f"{label}: {type(e).__name__}: {str(e)[:300]}")
    tl_ex = bh.tilelang_example("flash_attention")
    if tl_ex is not None:
        import tilelang

        kernels["tilelang"] = tilelang.compile(tl_ex.flash_attention(batch, heads, seq, dim, causal, 1, *cfg),
                                               out_idx=[-1])
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def cudnn(q, k_, v):
        with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
            return torch.nn.functional.scaled_dot_product_attention(q, k_, v, is_causal=causal)
    kernels["cudnn"] = cudnn
    errs = {name: rel_err(kern(q, k_, v), ref) for name, kern in kernels.items()}
    print("rel_err", {n: f"{e:.1e}" for n, e in errs.items()})
    names = list(kernels)
    rounds: dict = {n: [] for n in names}
    states: list = []
    for r in range(args.rounds):
        order = names if r % 2 == 0 else names[::-1]
        for n in order:
            st = gpu_state()
            t = bench(lambda: kernels[n](q, k_, v))
            rounds[n].append(round(flops / t / 1e9, 1))
            states.append((r, n, rounds[n][-1], st))
            print(f"round {r:2d} {n:12s} {rounds[n][-1]:7.1f} TFLOP/s  [{st}]")
    # the same kernels on inputs at other addresses (a spacer of another size before each set)
    addresses: dict = {n: [] for n in names}
    keep = []
    for a in range(args.addresses):
        keep.append(torch.empty((a + 1) * 3 * 1024 * 1024 + a * 4096, dtype=torch.uint8, device="cuda"))
        qa = torch.randn_like(q)
        ka, va = torch.randn_like(q), torch.randn_like(q)
        for n in names:
            t = bench(lambda: kernels[n](qa, ka, va))
            addresses[n].append(round(flops / t / 1e9, 1))
        print(f"inputs {a}: " + ", ".join(f"{n} {addresses[n][-1]}" for n in names)
              + f"  (q at {qa.data_ptr() % (1 << 24):#x} mod 16M)")
    summary = {n: {"median": statistics.median(rounds[n]), "min": min(rounds[n]), "max": max(rounds[n]),
                   "addresses": addresses[n]} for n in names}
    print("\nmedian / min / max TFLOP/s over the rounds:")
    for n in names:
        s = summary[n]
        print(f"  {n:12s} {s['median']:7.1f} {s['min']:7.1f} {s['max']:7.1f}   other inputs: {s['addresses']}")
    if args.out:
        Path(args.out).write_text(json.dumps({
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "device": torch.cuda.get_device_name(), "shape": f"{batch}x{heads}x{seq}", "dim": dim, "causal": causal,
            "config": "x".join(map(str, cfg)), "rel_err": errs, "rounds": rounds, "gpu_states": states,
            "addresses": addresses, "summary": summary}, indent=1))


if __name__ == "__main__":
    main()
