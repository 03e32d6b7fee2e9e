"""The Analyzer's predictions against the measured H200 times of the GEMM and attention benchmarks.

Reads a bench_hopper result file (default: the run of the final tree, interleaved rounds), builds
each row's kernel with the configuration it was timed with (examples/gemm.py, examples/flash_attention.py),
analyses it for the H200 and prints measured time, predicted time, their ratio, the bound and the
terms. No GPU needed: ``python benchmarks/analyzer_vs_h200.py [--results FILE] [--markdown]``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))
DEFAULT = os.path.join(ROOT, "benchmarks", "results", "2026-12-02-h200-hopper-rounds-0101.json")

from tegula.tools import Analyzer  # noqa: E402


def rows(path: str = DEFAULT) -> list[dict]:
    """One dict per benchmark row: label, kernel (a PrimFunc), measured seconds, nominal FLOPs."""
    import flash_attention as fa
    import gemm as gm

    data = json.load(open(path))
    out = []
    for r in data["sections"]["gemm"]["rows"]:
        M, N, K = (int(x) for x in r["shape"].split("x"))
        bm, bn, bk, stages, threads = (int(x) for x in r["wgmma_config"].split("x"))
        flops = 2 * M * N * K
        tflops = r.get("wgmma_rounds_tflops") or r["wgmma_tflops"]
        out.append({"label": f"GEMM {r['dtype']} {r['shape']}", "config": r["wgmma_config"],
                    "kernel": gm.matmul.get_tir(M, N, K, bm, bn, bk, stages, threads, dtype=r["dtype"]),
                    "measured": flops / (tflops * 1e12), "tflops": tflops})
    for r in data["sections"]["attention"]["rows"]:
        b, h, s = (int(x) for x in r["shape"].split("x"))
        d, causal = int(r["dim"]), bool(r["causal"])
        bm, bn, stages, threads = (int(x) for x in r["wgmma_config"].split("x"))
        flops = 4 * b * h * s * s * d * (0.5 if causal else 1.0)
        tflops = r.get("wgmma_rounds_tflops") or r["wgmma_tflops"]
        out.append({"label": f"attention d{d}{' causal' if causal else ''} {r['shape']}", "config": r["wgmma_config"],
                    "kernel": fa.flash_attention(b, h, s, d, causal, 1, bm, bn, stages, threads),
                    "measured": flops / (tflops * 1e12), "tflops": tflops})
    return out


def compare(path: str = DEFAULT) -> list[dict]:
    """Each row with the Analyzer's result and predicted / measured."""
    out = []
    for r in rows(path):
        a = Analyzer.analysis(r["kernel"], "H200")
        out.append({**r, "analysis": a, "predicted": a.estimated_time, "ratio": a.estimated_time / r["measured"]})
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--results", default=DEFAULT)
    p.add_argument("--markdown", action="store_true", help="print a Markdown table")
    args = p.parse_args()
    res = compare(args.results)
    if args.markdown:
        print("| kernel | config | measured (us) | predicted (us) | predicted / measured | bound | blocks/SM, waves |")
        print("| --- | --- | ---: | ---: | ---: | --- | --- |")
    for r in res:
        a = r["analysis"]
        if args.markdown:
            print(f"| {r['label']} | {r['config']} | {r['measured'] * 1e6:.1f} | {r['predicted'] * 1e6:.1f} | "
                  f"{r['ratio']:.2f} | {a.bound} | {a.blocks_per_sm}, {a.waves} |")
        else:
            print(f"{r['label']:<36} {r['config']:<18} measured {r['measured'] * 1e6:9.1f} us  predicted "
                  f"{r['predicted'] * 1e6:9.1f} us  x{r['ratio']:.2f}  {a.bound}")
    worst = max(abs(r["ratio"] - 1) for r in res)
    print(f"\n{len(res)} rows; worst |predicted / measured - 1| = {worst:.1%}")


if __name__ == "__main__":
    main()
