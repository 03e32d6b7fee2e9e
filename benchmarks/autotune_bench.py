"""Autotune the GEMM and flash attention on the GPU (16 and 12 configurations) and print the
best of each with the peer's time. ``python benchmarks/autotune_bench.py [--out results.json]``."""
import argparse
import datetime
import itertools
import json
import math
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
import flash_attention as fa  # noqa: E402
import gemm  # noqa: E402

import tegula  # noqa: E402


def gemm_configs():
    return [dict(block_M=m, block_N=n, block_K=k, num_stages=s, threads=t)
            for (m, n, t), k, s in itertools.product(((128, 128, 128), (128, 256, 256)), (32, 64), (2, 3, 4, 5))]


def fa_configs():
    return [dict(block_M=m, block_N=n, num_stages=s, threads=t)
            for (m, t), n, s in itertools.product(((64, 128), (128, 128), (128, 256)), (32, 64), (1, 2))]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--out", default=None)
    args = p.parse_args()
    out = {"date": datetime.date.today().isoformat(), "device": torch.cuda.get_device_name(),
           "torch": torch.__version__}

    tuned_gemm = tegula.autotune(configs=gemm_configs(), ref_prog=lambda a, b: a @ b, rtol=1e-2, atol=1e-2)(
        tegula.jit(out_idx=[-1])(gemm.matmul.func))
    n = 4096
    t0 = time.time()
    k = tuned_gemm(n, n, n)
    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn_like(a)
    import triton.testing

    t_peer = triton.testing.do_bench(lambda: a @ b, return_mode="median")
    out["gemm"] = {"shape": [n, n, n], "configs": len(gemm_configs()), "best": k.config, "latency_ms": k.latency,
                   "tflops": 2 * n ** 3 / k.latency / 1e9, "cublas_tflops": 2 * n ** 3 / t_peer / 1e9,
                   "tuning_s": time.time() - t0, "results": k.autotune_results}
    print("gemm", out["gemm"])

    B, H, S, D = 4, 16, 4096, 128

    def attn_factory(batch, heads, seq_len, dim, is_causal=False, groups=1, block_M=64, block_N=64,
                     num_stages=1, threads=128):
        return fa.flash_attention(batch, heads, seq_len, dim, is_causal, groups, block_M, block_N,
                                  num_stages, threads)

    ref = lambda q, k_, v: torch.nn.functional.scaled_dot_product_attention(q, k_, v)  # noqa: E731
    tuned_fa = tegula.autotune(configs=fa_configs(), ref_prog=ref, rtol=1e-2, atol=1e-2)(
        tegula.jit(out_idx=[-1])(attn_factory))
    t0 = time.time()
    kf = tuned_fa(B, H, S, D)
    q = torch.randn(B, H, S, D, device="cuda", dtype=torch.float16)
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
        t_flash = triton.testing.do_bench(lambda: ref(q, q, q), return_mode="median")
    flops = 4 * B * H * S * S * D
    out["attention"] = {"shape": [B, H, S, D], "configs": len(fa_configs()), "best": kf.config,
                        "latency_ms": kf.latency, "tflops": flops / kf.latency / 1e9,
                        "sdpa_flash_tflops": flops / t_flash / 1e9, "tuning_s": time.time() - t0,
                        "results": kf.autotune_results}
    print("attention", out["attention"])
    if args.out:
        json.dump(out, open(args.out, "w"), indent=1, default=str)


if __name__ == "__main__":
    main()
