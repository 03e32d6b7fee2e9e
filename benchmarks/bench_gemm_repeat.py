"""GEMM fp16 against bf16 at one shape, measured in interleaved rounds: whether a gap between the
two dtypes (or between tegula and TileLang) is larger than the run-to-run spread of one GPU.

    python benchmarks/bench_gemm_repeat.py [--n 4096,8192] [--rounds 5] [--out results.json] [--sass DIR]

Every kernel is checked against torch before it is timed; each round times every kernel once
(``do_bench`` median), so drifts of the GPU's clocks reach all of them alike. ``--sass DIR``
writes each tegula kernel's SASS (``cuobjdump -sass``) and its instruction counts by opcode.
"""
from __future__ import annotations

import argparse
import collections
import json
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import torch  # noqa: E402

import tegula  # noqa: E402
from bench_cuda import bench, rel_err  # noqa: E402
from bench_hopper import NO_TMA_STORE, tilelang_example  # noqa: E402


def _sass(kernel, name: str, out: Path) -> dict:
    """Opcode counts of a tegula kernel's SASS (written to ``out/name.sass``)."""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(kernel.artifact.cubin)
        f.flush()
        text = subprocess.run(["cuobjdump", "-sass", f.name], capture_output=True, text=True).stdout
    (out / f"{name}.sass").write_text(text)
    ops = collections.Counter(m.group(1).split(".")[0] for m in re.finditer(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9.]+)", text))
    return dict(ops.most_common())


def main() -> None:
    import gemm as ex

    p = argparse.ArgumentParser()
    p.add_argument("--n", default="4096", help="M = N = K, one or more (comma-separated)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--config", default="128x256x64x3x256")
    p.add_argument("--out", default="")
    p.add_argument("--sass", default="")
    args = p.parse_args()
    cfg = tuple(int(x) for x in args.config.split("x"))
    tl_ex = tilelang_example("gemm")
    kernels = {}
    for n in (int(x) for x in args.n.split(",")):
        for dtype in ("float16", "bfloat16"):
            tdt = getattr(torch, dtype)
            a = torch.randn(n, n, device="cuda", dtype=tdt)
            b = torch.randn(n, n, device="cuda", dtype=tdt)
            ref = a.float() @ b.float()
            tag = f"{dtype} {n}"
            kernels[f"cublas {tag}"] = (lambda a=a, b=b: a @ b, None, 2 * n ** 3)
            built = {"tegula": tegula.compile(ex.matmul.get_tir(n, n, n, *cfg, dtype=dtype), out_idx=[-1],
                                              target="cuda"),
                     "tegula_no_tma_store": tegula.compile(ex.matmul.get_tir(n, n, n, *cfg, dtype=dtype), out_idx=[-1],
                                                           target="cuda", pass_configs=NO_TMA_STORE)}
            if tl_ex is not None:
                built["tilelang"] = tl_ex.matmul(n, n, n, *cfg, dtype=dtype)
            for name, k in built.items():
                err = rel_err(k(a, b), ref)
                assert err < 1e-2, (name, tag, err)
                kernels[f"{name} {tag}"] = (lambda k=k, a=a, b=b: k(a, b), k if name.startswith("tegula") else None,
                                            2 * n ** 3)
    times: dict = {name: [] for name in kernels}
    for _ in range(args.rounds):
        for name, (fn, _, flops) in kernels.items():
            times[name].append(flops / bench(fn) / 1e9)
    rows = []
    for name, ts in times.items():
        rows.append({"kernel": name, "tflops_median": statistics.median(ts), "tflops_min": min(ts),
                     "tflops_max": max(ts), "rounds": ts})
        print(f"{name:36s} median {statistics.median(ts):7.1f}  min {min(ts):7.1f}  max {max(ts):7.1f} TFLOP/s")
    result = {"device": torch.cuda.get_device_name(0), "n": args.n, "config": args.config, "rounds": args.rounds,
              "rows": rows}
    if args.sass:
        out = Path(args.sass)
        out.mkdir(parents=True, exist_ok=True)
        result["sass_opcodes"] = {name: _sass(k, name.replace(" ", "-"), out)
                                  for name, (_, k, _) in kernels.items() if k is not None}
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
