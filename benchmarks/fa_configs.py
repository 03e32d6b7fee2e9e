"""Flash attention head dim 64: more tile configurations against SDPA's flash backend."""
import sys

import torch
import torch.nn.functional as F
import triton.testing
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, "examples")
import flash_attention as fa  # noqa: E402

import tegula  # noqa: E402

B, H, S, D = 4, 32, 4096, 64
q = torch.randn(B, H, S, D, device="cuda", dtype=torch.float16)
k = torch.randn_like(q)
v = torch.randn_like(q)
for causal in (False, True):
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
        t_flash = triton.testing.do_bench(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal),
                                          return_mode="median")
    flops = 4 * B * H * S * S * D * (0.5 if causal else 1)
    for bm, bn, st, th in ((128, 64, 2, 128), (128, 128, 2, 128), (128, 64, 3, 128), (128, 128, 3, 128),
                           (64, 128, 2, 128), (128, 32, 3, 128), (256, 64, 2, 256)):
        try:
            kern = tegula.compile(fa.flash_attention(B, H, S, D, causal, 1, bm, bn, st, th), out_idx=[-1],
                                  target="cuda")
            o = kern(q, k, v)
            err = float((o.double() - ref.double()).norm() / ref.double().norm())
            t = triton.testing.do_bench(lambda: kern(q, k, v), return_mode="median")
            print(f"causal={causal} {bm}x{bn} s{st} t{th}: {flops / t / 1e9:6.1f} TFLOP/s "
                  f"vs flash {flops / t_flash / 1e9:6.1f} ratio {t_flash / t:.3f} err {err:.1e}")
        except Exception as e:
            print(f"causal={causal} {bm}x{bn} s{st} t{th}: {type(e).__name__}: {str(e)[:150]}")
