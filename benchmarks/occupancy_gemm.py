"""GEMM 4096^3 fp16/bf16 with the compiler asked to leave room for 1, 2 or 3 blocks per SM."""
import sys

import torch
import triton.testing

sys.path.insert(0, "examples")
import gemm as ex  # noqa: E402

import tegula  # noqa: E402

n = 4096
for dtype in ("float16", "bfloat16"):
    a = torch.randn(n, n, device="cuda", dtype=getattr(torch, dtype))
    b = torch.randn_like(a)
    ref = a @ b
    t_peer = triton.testing.do_bench(lambda: a @ b, return_mode="median")
    for cfg in ((128, 128, 32, 3, 128), (128, 128, 32, 4, 128), (128, 128, 64, 3, 128)):
        for mb in (0, 3):
            k = tegula.compile(ex.matmul.get_tir(n, n, n, *cfg, dtype=dtype), out_idx=[-1], target="cuda",
                               pass_configs={"tegula.min_blocks_per_sm": mb})
            c = k(a, b)
            err = float((c.double() - ref.double()).norm() / ref.double().norm())
            t = triton.testing.do_bench(lambda: k(a, b), return_mode="median")
            print(f"{dtype} {cfg} min_blocks={mb}: {2 * n**3 / t / 1e9:6.1f} TFLOP/s, "
                  f"ratio {t_peer / t:.3f}, err {err:.1e}")
