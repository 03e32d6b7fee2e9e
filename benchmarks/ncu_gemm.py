"""One GEMM launch to profile: ncu --clock-control none python benchmarks/ncu_gemm.py [bm bn bk stages threads]."""
import sys

import torch

sys.path.insert(0, "examples")
import gemm as ex  # noqa: E402

import tegula  # noqa: E402

cfg = [int(x) for x in sys.argv[1:6]] or [128, 128, 32, 3, 128]
n = 4096
k = tegula.compile(ex.matmul.get_tir(n, n, n, *cfg), out_idx=[-1], target="cuda")
a = torch.randn(n, n, device="cuda", dtype=torch.float16)
b = torch.randn(n, n, device="cuda", dtype=torch.float16)
for _ in range(3):
    k(a, b)
torch.cuda.synchronize()
