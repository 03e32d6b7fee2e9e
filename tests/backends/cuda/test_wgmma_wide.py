"""wgmma with warpgroups side by side along N: a tile of 64 rows over two or more warpgroups.

A 64-row accumulator has one 64-row slab, so the block's warpgroups split its columns
(``WgmmaLayout`` with ``wgn > 1``); before, such gemms fell back to ``mma.sync`` with every warp
loading all of A, and their shared tiles kept a layout the copy engine cannot write (decode
attention: 64 heads of a latent KV cache per block). Compile-only checks of the generated code's
shape for sm_90a, and results on ``cpu`` and ``cuda-emu:sm_90a`` against float64.
"""
import math
import re

import numpy as np
import pytest

import tegula
import tegula.language as T
from tegula import config
from tegula.backends.cuda.compiler import available_backends

from cuda_gpu_util import sm90a_gpu

STAGED = re.compile(r"\w_stage_\d")  # a fragment's shared copy (lowering_context.Ctx.staged)
needs_compiler = pytest.mark.skipif(not available_backends(), reason="no CUDA compiler (NVRTC or nvcc) here")


def _gemm(M, N, K, bm, bn, bk, threads, trans_B):
    b_shape = (N, K) if trans_B else (K, N)
    bs_ = (bn, bk) if trans_B else (bk, bn)

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor(b_shape, "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared(bs_, "float16")
            C_l = T.alloc_fragment((bm, bn), "float32")
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[by * bm, k * bk], A_s)
                if trans_B:
                    T.copy(B[bx * bn, k * bk], B_s)
                else:
                    T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_l, transpose_B=trans_B)
            T.copy(C_l, C[by * bm, bx * bn])

    return main


def latent_decode(batch, heads, seq, dim, pe, block_H, block_N, threads=256):
    """One query token per head attends to a KV cache shared by all heads (keys are the cache
    and its rotary part, values the cache): a block holds ``block_H`` heads."""
    scale = 1.0 / math.sqrt(dim + pe) * math.log2(math.e)

    @T.prim_func
    def main(Q: T.Tensor((batch, heads, dim), "float16"), Qr: T.Tensor((batch, heads, pe), "float16"),
             KV: T.Tensor((batch, seq, dim), "float16"), Kr: T.Tensor((batch, seq, pe), "float16"),
             O: T.Tensor((batch, heads, dim), "float16")):
        with T.Kernel(heads // block_H, batch, threads=threads) as (hb, b):
            q_s = T.alloc_shared((block_H, dim), "float16")
            qr_s = T.alloc_shared((block_H, pe), "float16")
            kv_s = T.alloc_shared((block_N, dim), "float16")
            kr_s = T.alloc_shared((block_N, pe), "float16")
            p_s = T.alloc_shared((block_H, block_N), "float16")
            s = T.alloc_fragment((block_H, block_N), "float32")
            o = T.alloc_fragment((block_H, dim), "float32")
            m = T.alloc_fragment((block_H,), "float32")
            m_old = T.alloc_fragment((block_H,), "float32")
            l = T.alloc_fragment((block_H,), "float32")
            l_blk = T.alloc_fragment((block_H,), "float32")
            T.copy(Q[b, hb * block_H:(hb + 1) * block_H, :], q_s)
            T.copy(Qr[b, hb * block_H:(hb + 1) * block_H, :], qr_s)
            T.fill(o, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity("float32"))
            for kb in T.Pipelined(T.ceildiv(seq, block_N), num_stages=2):
                T.copy(KV[b, kb * block_N:(kb + 1) * block_N, :], kv_s)
                T.copy(Kr[b, kb * block_N:(kb + 1) * block_N, :], kr_s)
                T.gemm(q_s, kv_s, s, transpose_B=True, clear_accum=True, policy=T.GemmWarpPolicy.FullCol)
                T.gemm(qr_s, kr_s, s, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)
                T.copy(m, m_old)
                T.reduce_max(s, m, dim=1, clear=False)
                for i, j in T.Parallel(block_H, block_N):
                    s[i, j] = T.exp2(s[i, j] * scale - m[i] * scale)
                T.reduce_sum(s, l_blk, dim=1)
                for i in T.Parallel(block_H):
                    l[i] = l[i] * T.exp2((m_old[i] - m[i]) * scale) + l_blk[i]
                for i, j in T.Parallel(block_H, dim):
                    o[i, j] *= T.exp2((m_old[i] - m[i]) * scale)
                T.copy(s, p_s)
                T.gemm(p_s, kv_s, o, policy=T.GemmWarpPolicy.FullCol)
            for i, j in T.Parallel(block_H, dim):
                o[i, j] /= l[i]
            T.copy(o, O[b, hb * block_H:(hb + 1) * block_H, :])

    return main


def _decode_reference(q, qr, kv, kr):
    q, qr, kv, kr = (x.astype(np.float64) for x in (q, qr, kv, kr))
    s = (q @ np.swapaxes(kv, 1, 2) + qr @ np.swapaxes(kr, 1, 2)) / math.sqrt(q.shape[-1] + qr.shape[-1])
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ kv


def _rel(out, ref):
    out = np.asarray(out, dtype=np.float64)
    assert np.isfinite(out).all()
    return np.linalg.norm(out - ref) / np.linalg.norm(ref)


# ------------------------------------------------------------------------------- compile-only

@needs_compiler
@pytest.mark.parametrize("trans_B", [True, False])
def test_64_row_gemm_over_two_warpgroups_is_wgmma(trans_B, tmp_path):
    """Each warpgroup issues m64n64 for its half of the 128 columns, at its own offset of B."""
    with config.override(cache_dir=str(tmp_path)):
        src = tegula.compile(_gemm(128, 256, 128, 64, 128, 64, 256, trans_B), out_idx=[-1],
                             target="cuda:sm_90a").get_kernel_source()
    assert "tl::wgmma_ss<64," in src and "mma_m16n8k16" not in src
    calls = [ln for ln in src.splitlines() if "tl::wgmma_ss<" in ln]
    assert calls and all(">> 7" in ln.split("&B_s[")[1] for ln in calls)  # B at the warpgroup's columns
    assert "tl::tma_load(" in src


@needs_compiler
def test_latent_decode_is_wgmma_with_tma_loads(tmp_path):
    """A 64-head block over 256 threads: every gemm on wgmma (two warpgroups side by side), the
    512-wide cache tile loaded by TMA in 64-column boxes, row reductions across the two
    warpgroups through two partials per row (not eight)."""
    with config.override(cache_dir=str(tmp_path)):
        src = tegula.compile(latent_decode(2, 128, 256, 512, 64, 64, 64), out_idx=[-1],
                             target="cuda:sm_90a").get_kernel_source()
    assert "mma_m16n8k16" not in src and "ldmatrix" not in src
    assert "tl::wgmma_ss<32," in src      # S: 64 x 64, 32 columns per warpgroup
    assert "tl::wgmma_ss<256," in src     # O: 64 x 512, 256 columns per warpgroup
    assert src.count("tl::tma_load(&kv_s[") == 16  # 8 boxes, prologue and loop
    assert "copy_vec<16>(&kv_s" not in src
    assert "w_" in src and "< 2; ++w_" in src  # partials of 2 warpgroups per row
    # barriers per step: the stage's, two per reduction (partials written, then freed), and the
    # one before P.V reads p_s
    loop = src[src.index("for (int kb = 0;"):]
    assert loop[:loop.index("\n  }\n")].count("__syncthreads()") == 6


@needs_compiler
def test_sm80_keeps_mma_sync_for_the_same_kernel(tmp_path):
    with config.override(cache_dir=str(tmp_path)):
        src = tegula.compile(latent_decode(1, 64, 128, 64, 32, 64, 64), out_idx=[-1],
                             target="cuda:sm_80").get_kernel_source()
    assert "tl::wgmma" not in src and "mma_m16n8k16" in src


# ------------------------------------------------------------------------------- results

@pytest.mark.parametrize("trans_B", [True, False])
def test_64_row_gemm_over_two_warpgroups_on_the_emulator(trans_B, rng):
    f = _gemm(64, 128, 64, 64, 128, 32, 256, trans_B)
    a = rng.standard_normal((64, 64)).astype(np.float16)
    b = rng.standard_normal((128, 64) if trans_B else (64, 128)).astype(np.float16)
    ref = a.astype(np.float64) @ (b.T if trans_B else b).astype(np.float64)
    k = tegula.compile(f, out_idx=[-1], target="cuda-emu:sm_90a")
    assert "wgmma_ss" in k.get_kernel_source() and "mma_m16n8k16" not in k.get_kernel_source()
    assert _rel(k(a, b), ref) < 2e-3


@pytest.mark.parametrize("target", ["cpu", "cuda-emu:sm_90a"])
def test_latent_decode_results(target, rng):
    B, H, S, D, P = 1, 64, 128, 128, 32  # 64 columns of O per warpgroup: one MN-major swizzle block
    q = rng.standard_normal((B, H, D)).astype(np.float16)
    qr = rng.standard_normal((B, H, P)).astype(np.float16)
    kv = rng.standard_normal((B, S, D)).astype(np.float16)
    kr = rng.standard_normal((B, S, P)).astype(np.float16)
    k = tegula.compile(latent_decode(B, H, S, D, P, 64, 64), out_idx=[-1], target=target)
    if target != "cpu":
        assert "wgmma_ss" in k.get_kernel_source() and "mma_m16n8k16" not in k.get_kernel_source()
    assert _rel(k(q, qr, kv, kr), _decode_reference(q, qr, kv, kr)) < 5e-3


# ------------------------------------------------------------------------------- dequantized A

def dequant_gemm(M, N, K, bm, bn, bk, threads, stages=2):
    """``C[m, n] = sum_k W[m, k] X[n, k]``: W packed two 4-bit integers per byte (low nibble
    first, value - 8), unpacked in registers into the A operand of the gemm."""

    @T.prim_func
    def main(Wq: T.Tensor((M, K // 2), "uint8"), X: T.Tensor((N, K), "float16"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            wq_s = T.alloc_shared((bm, bk // 2), "uint8")
            x_s = T.alloc_shared((bn, bk), "float16")
            wq = T.alloc_fragment((bm, bk // 2), "uint8")
            w = T.alloc_fragment((bm, bk), "float16")
            acc = T.alloc_fragment((bm, bn), "float32")
            T.clear(acc)
            for k in T.Pipelined(K // bk, num_stages=stages):
                T.copy(Wq[by * bm, k * bk // 2], wq_s)
                T.copy(X[bx * bn, k * bk], x_s)
                T.copy(wq_s, wq)
                for i, j in T.Parallel(bm, bk):
                    w[i, j] = T.Cast("float16", T.Cast("int32", (wq[i, j // 2] >> ((j % 2) * 4)) & 15) - 8)
                T.gemm(w, x_s, acc, transpose_B=True)
            T.copy(acc, C[by * bm, bx * bn])

    return main


def _unpack(wq):
    lo, hi = (wq & 15).astype(np.int64) - 8, (wq >> 4).astype(np.int64) - 8
    return np.stack([lo, hi], axis=-1).reshape(wq.shape[0], -1).astype(np.float64)


@needs_compiler
def test_unpacked_operand_stays_in_registers(tmp_path):
    """The unpacked A tile takes the layout its wgmma reads from registers, and the packed bytes
    the columns of it: no staging through shared memory, no gather of A fragments, one barrier
    per iteration (the pipeline's)."""
    with config.override(cache_dir=str(tmp_path)):
        src = tegula.compile(dequant_gemm(256, 256, 256, 128, 128, 64, 256), out_idx=[-1],
                             target="cuda:sm_90a").get_kernel_source()
    assert "tl::wgmma_rs<128, half_t, false>(&acc[0], reinterpret_cast<unsigned*>(&w[0])" in src
    assert not STAGED.search(src) and "A_frag" not in src
    loop = src[src.index("for (int k = 0;"):]
    assert loop[:loop.index("tl::wgmma_rs")].count("__syncthreads()") == 1


@pytest.mark.parametrize("target", ["cpu", "cuda-emu", "cuda-emu:sm_90a"])
def test_unpacked_operand_results(target, rng):
    M, N, K = 128, 64, 128
    wq = rng.integers(0, 256, (M, K // 2), dtype=np.uint8)
    x = rng.standard_normal((N, K)).astype(np.float16)
    k = tegula.compile(dequant_gemm(M, N, K, 128, 64, 64, 256), out_idx=[-1], target=target)
    if target == "cuda-emu:sm_90a":
        assert not STAGED.search(k.get_kernel_source())
    ref = _unpack(wq) @ x.astype(np.float64).T
    assert _rel(k(wq, x), ref) < 1e-3


# ------------------------------------------------------------------------------- on the GPU

@pytest.mark.gpu
@pytest.mark.parametrize("B, H, S, D, P", [(2, 128, 1024, 512, 64), (1, 64, 256, 128, 32)])
def test_latent_decode_on_gpu(B, H, S, D, P, rng):
    torch = sm90a_gpu()
    k = tegula.compile(latent_decode(B, H, S, D, P, 64, 64), out_idx=[-1], target="cuda")
    assert "wgmma_ss" in k.get_kernel_source()
    ins = [rng.standard_normal(s).astype(np.float16) for s in ((B, H, D), (B, H, P), (B, S, D), (B, S, P))]
    out = k(*[torch.tensor(x, device="cuda") for x in ins]).double().cpu().numpy()
    assert _rel(out, _decode_reference(*ins)) < 5e-3


@pytest.mark.gpu
def test_unpacked_operand_on_gpu(rng):
    torch = sm90a_gpu()
    M, N, K = 512, 384, 512
    wq = rng.integers(0, 256, (M, K // 2), dtype=np.uint8)
    x = rng.standard_normal((N, K)).astype(np.float16)
    k = tegula.compile(dequant_gemm(M, N, K, 128, 128, 128, 256), out_idx=[-1], target="cuda")
    assert "wgmma_rs" in k.get_kernel_source()
    out = k(torch.tensor(wq, device="cuda"), torch.tensor(x, device="cuda")).double().cpu().numpy()
    assert _rel(out, _unpack(wq) @ x.astype(np.float64).T) < 1e-3
