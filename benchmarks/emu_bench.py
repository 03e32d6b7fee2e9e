"""Time the thread-level emulator (``target="cuda-emu"``) on fp16 GEMMs and flash attention.

The kernels are lowered once by the CUDA pipeline (sm_80: mma.sync, cp.async; sm_90a: TMA,
mbarriers, wgmma), then run with every check on (races, bounds, uninitialized reads; on sm_90a
also the async proxy, phases and wgmma registers). Runs on one core (BLAS threads pinned to 1 unless already set).
Prints the lowering time, the first run (which includes compiling the IR to closures) and the
median of the following runs, and checks the results against float64 numpy.

    taskset -c 0 python benchmarks/emu_bench.py [--repeat 5] [--arch sm_80 sm_90a]
"""

import os

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

from tegula.backends.cuda.pipeline import lower  # noqa: E402
from tegula.backends.emu import execute  # noqa: E402
from tegula.target import Target  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import flash_attention  # noqa: E402
import gemm  # noqa: E402


def bench(name: str, func: Any, args: list, check: Any, repeat: int, arch: str) -> None:
    name = f"{arch:6s} {name}"
    t0 = time.perf_counter()
    lowered = lower(func, Target("cuda", arch), {})
    t_lower = time.perf_counter() - t0
    times = []
    for _ in range(repeat + 1):
        work = [a.copy() for a in args]
        t0 = time.perf_counter()
        execute(lowered, work)
        times.append(time.perf_counter() - t0)
    err = check(work)
    print(f"{name:44s} lower {t_lower * 1e3:7.0f} ms   first {times[0]:6.2f} s   "
          f"median {statistics.median(times[1:]):6.2f} s   max err {err:.2e}", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--arch", nargs="+", default=["sm_80", "sm_90a"])
    opts = p.parse_args()
    for arch in opts.arch:
        run_all(opts.repeat, arch)


def run_all(r: int, arch: str) -> None:
    rng = np.random.default_rng(0)

    for (M, N, K), tiles in (((256, 256, 256), (128, 128, 32)), ((512, 512, 512), (128, 128, 32))):
        a = rng.standard_normal((M, K)).astype(np.float16)
        b = rng.standard_normal((K, N)).astype(np.float16)
        ref = a.astype(np.float64) @ b.astype(np.float64)
        f = gemm.matmul.get_tir(M, N, K, *tiles, 3, 128)
        bench(f"gemm fp16 {M}x{N}x{K}, {'x'.join(map(str, tiles))}, 128 thr", f,
              [a, b, np.zeros((M, N), np.float16)],
              lambda w, ref=ref: float(np.abs(w[2].astype(np.float64) - ref).max()), r, arch)

    B, H, S, D = 1, 4, 256, 64
    q, k, v = (rng.standard_normal((B, H, S, D)).astype(np.float16) for _ in range(3))
    f = flash_attention.flash_attention(B, H, S, D)
    ref = flash_attention.reference(q, k, v)
    bench(f"flash attention fp16 {B}x{H}x{S}x{D}, 64x64 tiles", f, [q, k, v, np.zeros_like(q)],
          lambda w: float(np.abs(w[3].astype(np.float64) - ref).max()), r, arch)


if __name__ == "__main__":
    main()
