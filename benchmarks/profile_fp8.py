"""One launch each of tegula's FP8 GEMM (examples/gemm_fp8.py) in launch order, with the default
RasterBlocks and with strips of 8, and of ``torch._scaled_mm``, at 8192^3, then the default and
``torch._scaled_mm`` at 4096^3; each launch inside the NVTX range ``prof`` (the label nested in
it) so that a profiler picks those launches alone, in this order:

    ncu --nvtx --nvtx-include "prof/" --set full --clock-control none -o OUT/fp8 \\
        python benchmarks/profile_fp8.py [CONFIG]

CONFIG defaults to 128x256x128x4x256 (block M, N, K, stages, threads).
"""
from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

import gemm_fp8 as ex  # noqa: E402
import tegula  # noqa: E402
from tegula.passconfig import PassConfigKey  # noqa: E402


def main() -> None:
    cfg = tuple(int(x) for x in (sys.argv[1] if len(sys.argv) > 1 else "128x256x128x4x256").split("x"))

    def build(n, pass_configs=None):
        return tegula.compile(ex.matmul_fp8.__wrapped__(n, n, n, *cfg), out_idx=[-1], target="cuda",
                              pass_configs=pass_configs)

    one = torch.tensor(1.0, device="cuda")
    for n, variants in ((8192, {"launch_order": {PassConfigKey.TEGULA_BLOCK_RASTER: 0}, "default": None,
                                "raster_8": {PassConfigKey.TEGULA_BLOCK_RASTER: 8}}),
                        (4096, {"default": None})):
        a = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
        b = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
        runs = {f"tegula_{label}_{n}": build(n, pc) for label, pc in variants.items()}
        runs[f"scaled_mm_{n}"] = lambda: torch._scaled_mm(a, b.t(), one, one, out_dtype=torch.bfloat16)
        for label, k in runs.items():
            (k() if label.startswith("scaled_mm") else k(a, b))  # loaded and warm before the profiled launch
        torch.cuda.synchronize()
        for label, k in runs.items():
            torch.cuda.nvtx.range_push("prof")
            torch.cuda.nvtx.range_push(label)
            (k() if label.startswith("scaled_mm") else k(a, b))
            torch.cuda.nvtx.range_pop()
            torch.cuda.nvtx.range_pop()
            torch.cuda.synchronize()
            print("RESULT", label)


if __name__ == "__main__":
    main()
