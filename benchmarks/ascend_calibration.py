"""The NPU cost and timing model against published figures (no device: every tegula number here
is modelled, with the model version printed).

1. The 110 single-instruction cases of shared/reference/ascend-instr-cycles.tsv that have a
   profiled cycle count: this model's precision (1 - |profiled - model| / profiled) next to the
   public model's, per instruction.
2. End to end: hand-written PTO GEMM fp16 -> fp32 on A3 (24 cores; 1536^3 to 7680^3) and flash
   attention forward (B1 H12 S32K D128) against the published times, with tegula's own kernels
   (examples/ascend/gemm.py at 128x256x64, two stages; examples/ascend/flash_attention.py at
   128 x 128 blocks).

    python benchmarks/ascend_calibration.py [--tsv PATH] [--skip-fa]
"""
import argparse
import math
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples", "ascend"))

import tegula  # noqa: E402
from tegula.backends.npu import calibration, cost  # noqa: E402
from tegula.backends.npu.emu import timing  # noqa: E402
from tegula.backends.npu.machine import machine  # noqa: E402

def _find_tsv() -> str:
    """shared/reference/ascend-instr-cycles.tsv beside the checkout (or a folder above it)."""
    d = ROOT
    for _ in range(4):
        d = os.path.dirname(d)
        p = os.path.join(d, "shared", "reference", "ascend-instr-cycles.tsv")
        if os.path.exists(p):
            return p
    return "ascend-instr-cycles.tsv"


TSV = _find_tsv()
GEMM_PUBLISHED_MS = {1536: 0.0388, 3072: 0.2067, 6144: 1.506, 7680: 3.168}
FA_PUBLISHED_MS = {"Ascend C": 37.6, "TileLang expert": 46.6}
AUTO = {"tl.ascend_auto_sync": True}


def single_instructions(path: str) -> None:
    cases = calibration.load_cases(path)
    s = calibration.summary(cases)
    print(f"## single instructions ({s['cases']} cases with a profiled count, {s['priced']} priced; "
          f"{cost.MODEL_VERSION})")
    print(f"median precision: tegula {s['median_precision']:.2f}, public model "
          f"{s['median_precision_public']:.2f}; within 25%: {s['within_25pct']} of {s['priced']}")
    print("| instruction | cases | tegula median precision | public model |")
    print("| --- | ---: | ---: | ---: |")
    for fam, (n, ours, pub) in s["families"].items():
        print(f"| {fam} | {n} | {ours:.2f} | {pub:.2f} |")


def gemm(n: int, arch: str = "a2a3", stages: int = 2) -> timing.Timing:
    import gemm as G

    k = tegula.compile(G.gemm(n, n, n, block_M=128, block_N=256, block_K=64, num_stages=stages),
                       target=f"ascend-emu:{arch}", pass_configs=AUTO)
    return timing.model(k)


def end_to_end(skip_fa: bool) -> None:
    m = machine("a2a3")
    print("\n## GEMM fp16 -> fp32 (128x256x64 tiles, 2 stages) on a2a3, 24 AI cores, modelled")
    print("| M = N = K | modelled ms | published ms (hand-written PTO, A3) | modelled / published "
          "| modelled % of cube peak |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    for n in (1536, 3072, 4096, 6144, 7680):
        t = gemm(n)
        pub = GEMM_PUBLISHED_MS.get(n)
        ratio = f"{t.time_us / 1e3 / pub:.2f}" if pub else "-"
        print(f"| {n} | {t.time_us / 1e3:.4f} | {pub if pub else '-'} | {ratio} | "
              f"{100 * t.cube_peak_fraction(m):.1f} |")
    if skip_fa:
        return
    import flash_attention as F

    S, D, heads = 32768, 128, 12
    k = tegula.compile(F.flash_attention(S, D, block_M=128, block_N=128, num_stages=1),
                       target="ascend-emu:a2a3", pass_configs=AUTO)
    t = timing.model(k)
    blocks = heads * S // 128
    waves = math.ceil(blocks / m.cores_aic)
    ms = t.block_cycles * waves / (m.clock_ghz * 1e6)
    flops = 4.0 * S * S * D * heads
    print("\n## flash attention forward B1 H12 S32768 D128 fp16 on a2a3 (examples/ascend/"
          "flash_attention.py, 128 x 128 blocks, one stage: two do not fit UB), modelled")
    print(f"modelled {ms:.1f} ms ({flops / (ms * 1e-3) / 1e12:.1f} TFLOP/s); published: "
          + ", ".join(f"{k2} {v} ms" for k2, v in FA_PUBLISHED_MS.items())
          + f"; modelled / Ascend C = {ms / FA_PUBLISHED_MS['Ascend C']:.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tsv", default=TSV)
    ap.add_argument("--skip-fa", action="store_true")
    a = ap.parse_args()
    print(cost.describe())
    single_instructions(a.tsv)
    end_to_end(a.skip_fa)


if __name__ == "__main__":
    main()
