"""``T.gemm`` on Hopper's wgmma (sm_90a): layouts, lowering, compile-only builds, and GPU results.

The compile-only tests need NVRTC (or nvcc) but no GPU; the ``gpu`` tests run on an sm_90a GPU
against float64 references on fresh random inputs, outputs poisoned (conftest).
"""
import sys
from pathlib import Path

import numpy as np
import pytest

import tegula
import tegula.language as T
from tegula import config
from tegula.backends.cuda.compiler import available_backends
from tegula.ir import expr as E
from tegula.layout.fragment import MmaLayout, RowsOf
from tegula.layout.shared import Swizzled
from tegula.layout.wgmma import WgmmaLayout, WgmmaShared
from tegula.passconfig import PassConfigKey

from cuda_gpu_util import sm90a_gpu

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
needs_compiler = pytest.mark.skipif(not available_backends(), reason="no CUDA compiler (NVRTC or nvcc) here")


def _ex(name):
    sys.path.insert(0, str(EXAMPLES))
    try:
        import importlib

        return importlib.import_module(name)
    finally:
        sys.path.pop(0)


def _ev(e, t):
    """Value of a layout expression in the thread index ``t``."""
    from tegula.ir.visitor import substitute
    from tegula.arith.simplify import simplify

    v = [x for x in _vars(e)]
    return int(simplify(substitute(e, {x: E.const(t) for x in v})).value)


def _vars(e):
    from tegula.ir.visitor import collect_vars

    return collect_vars(e)


# ------------------------------------------------------------------------------- layouts

@pytest.mark.parametrize("M, N, threads, wgn", [(64, 16, 128, 1), (128, 16, 128, 1), (128, 8, 256, 1),
                                               (64, 32, 256, 2), (128, 64, 512, 2), (64, 48, 384, 3)])
def test_wgmma_accumulator_layout_is_the_ptx_fragment(M, N, threads, wgn):
    """Each thread's registers hold the elements the PTX ISA's m64nNk16 D fragment gives them;
    warpgroups go along N (``wgn``) only where M has too few 64-row slabs for all of them."""
    lay = WgmmaLayout.choose(M, N, threads)
    assert lay.wgn == wgn
    wgm = threads // 128 // wgn
    Nw = N // wgn
    seen = set()
    t = E.Var("t")
    for tid in range(threads):
        wg, w, lane = tid // 128, (tid // 32) % 4, tid % 32
        for k in range(lay.local_size):
            mi, rest = divmod(k, Nw // 2)
            j, i = divmod(rest, 4)
            want = ((wg // wgn) * (M // wgm) + mi * 64 + 16 * w + lane // 4 + 8 * (i // 2),
                    (wg % wgn) * Nw + 8 * j + 2 * (lane % 4) + i % 2)
            got = tuple(_ev(c, tid) for c in lay.coords(t, k))
            assert got == want, (tid, k)
            seen.add(got)
    assert len(seen) == M * N  # every element held exactly once


def test_wgmma_layout_matches_mma_layout_when_one_instruction_per_warpgroup():
    t = E.Var("t")
    a, b = WgmmaLayout.choose(128, 64, 256), MmaLayout(128, 64, 8, 1)
    for tid in (0, 37, 130, 255):
        for k in range(0, a.local_size, 5):
            assert [_ev(c, tid) for c in a.coords(t, k)] == [_ev(c, tid) for c in b.coords(t, k)]
    # with two instructions per warpgroup the rows differ, and so do their row layouts
    c, d = WgmmaLayout.choose(128, 64, 128), MmaLayout(128, 64, 4, 1)
    assert not c.same(d) and not RowsOf(c).same(RowsOf(d))


def test_wgmma_layout_rejects_what_wgmma_cannot_cover():
    assert WgmmaLayout.choose(64, 64, 96) is None     # not whole warpgroups
    assert WgmmaLayout.choose(32, 64, 128) is None    # fewer than 64 rows
    assert WgmmaLayout.choose(64, 8, 256) is None     # 64 rows, and 4 columns per warpgroup
    assert WgmmaLayout.choose(128, 60, 128) is None   # N not a multiple of 8
    # 64 rows over two warpgroups: side by side along N, unless a warpgroup's columns are not
    # something one instruction covers
    assert WgmmaLayout.choose(64, 64, 256).wgn == 2
    assert WgmmaLayout.choose(64, 64, 256, n_ok=lambda n: n % 64 == 0) is None


@pytest.mark.parametrize("shape, eb, sw", [((64, 64), 2, 128), ((32, 128), 2, 128), ((64, 32), 2, 64),
                                           ((2, 64, 16), 2, 32), ((16, 96), 2, 64), ((16, 128), 1, 128)])
def test_wgmma_shared_layout_is_a_chunk_permutation(shape, eb, sw):
    lay = WgmmaShared(shape, eb)
    assert lay.swizzle_bytes == sw
    rows, cols = shape[-2], shape[-1]
    lead = shape[0] if len(shape) == 3 else 1
    offs = {}
    ch = 16 // eb
    for s in range(lead):
        for r in range(rows):
            for c in range(cols):
                idx = ((s,) if len(shape) == 3 else ()) + (r, c)
                offs[idx] = int(lay.offset(idx).value) if hasattr(lay.offset(idx), "value") else None
    vals = list(offs.values())
    assert sorted(vals) == list(range(lead * rows * cols))
    for idx, o in offs.items():  # 16-byte chunks stay whole and aligned
        if idx[-1] % ch:
            assert o == offs[idx[:-1] + (idx[-1] - 1,)] + 1
        else:
            assert o % ch == 0
    # the swizzle XORs the chunk with the row inside each block of sw bytes, blocks one after another
    W = sw // eb
    for r in range(rows):
        for c in range(0, cols, ch):
            idx = ((0,) if len(shape) == 3 else ()) + (r, c)
            blk, cc = divmod(c, W)
            base = blk * rows * W + r * W
            assert base <= offs[idx] < base + W


def test_wgmma_shared_layout_is_swizzled_when_one_block_wide():
    a, b = WgmmaShared((3, 64, 64), 2), Swizzled((3, 64, 64), 2)
    for idx in [(0, 0, 0), (1, 5, 17), (2, 63, 63), (0, 9, 40)]:
        assert int(a.offset(idx).value) == int(b.offset(idx).value)


# ------------------------------------------------------------------------------- compile-only

def _gemm(M, N, K, bm, bn, bk, stages, threads, dtype="float16", trans_A=False, trans_B=False):
    a_shape = (K, M) if trans_A else (M, K)
    b_shape = (N, K) if trans_B else (K, N)
    as_ = (bk, bm) if trans_A else (bm, bk)
    bs_ = (bn, bk) if trans_B else (bk, bn)

    @T.prim_func
    def main(A: T.Tensor(a_shape, dtype), B: T.Tensor(b_shape, dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            A_s = T.alloc_shared(as_, dtype)
            B_s = T.alloc_shared(bs_, dtype)
            C_l = T.alloc_fragment((bm, bn), "float32")
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                if trans_A:
                    T.copy(A[k * bk, by * bm], A_s)
                else:
                    T.copy(A[by * bm, k * bk], A_s)
                if trans_B:
                    T.copy(B[bx * bn, k * bk], B_s)
                else:
                    T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_l, transpose_A=trans_A, transpose_B=trans_B)
            T.copy(C_l, C[by * bm, bx * bn])

    return main


CONFIGS = [  # (bm, bn, bk, stages, threads, dtype, trans_A, trans_B)
    (128, 128, 32, 3, 128, "float16", False, False),
    (128, 256, 64, 3, 256, "bfloat16", False, False),
    (64, 128, 64, 2, 128, "float16", False, True),
    (128, 64, 32, 2, 128, "bfloat16", True, False),
    (64, 384, 64, 2, 128, "float16", True, True),
]


@needs_compiler
@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: "x".join(map(str, c[:5])) + f"-{c[5]}-{int(c[6])}{int(c[7])}")
def test_gemm_compiles_to_wgmma_on_sm90a(cfg, tmp_path):
    bm, bn, bk, st, th, dtype, ta, tb = cfg
    f = _gemm(512, 768, 256, bm, bn, bk, st, th, dtype, ta, tb)
    with config.override(cache_dir=str(tmp_path)):
        k = tegula.compile(f, out_idx=[-1], target="cuda:sm_90a")
        src = k.get_kernel_source()
        assert "tl::wgmma_ss<" in src and "wgmma_commit_group" in src
        assert "mma_m16n8k16" not in src and "ldmatrix" not in src
        assert k.artifact.cubin
        off = tegula.compile(f, out_idx=[-1], target="cuda:sm_90a",
                             pass_configs={PassConfigKey.TEGULA_DISABLE_WGMMA: True})
        assert "tl::wgmma" not in off.get_kernel_source() and "mma_m16n8k16" in off.get_kernel_source()
        sm80 = tegula.compile(f, out_idx=[-1], target="cuda:sm_80")
        assert "tl::wgmma" not in sm80.get_kernel_source()


@needs_compiler
def test_wgmma_operands_are_1024_byte_aligned(tmp_path):
    from tegula.backends.cuda.pipeline import lower
    from tegula.target import Target

    f = _gemm(256, 256, 256, 128, 128, 32, 3, 128)
    low = lower(f, Target("cuda", "sm_90a"), {})
    kern = next(s for s in _walk(low.body) if type(s).__name__ == "Kernel")
    offs = kern.annotations["smem_offsets"]
    named = {b.name: o for b, o in offs.items()}
    assert named["A_s"] % 1024 == 0 and named["B_s"] % 1024 == 0
    assert "WgmmaLayout" in kern.annotations["layouts"]["C_l"]
    assert kern.annotations["shared_layouts"]["A_s"].startswith("WgmmaShared")


def _walk(s):
    from tegula.ir.visitor import post_order_visit

    out = []
    post_order_visit(s, out.append)
    return out


@needs_compiler
def test_gemms_wgmma_cannot_cover_keep_mma_sync(tmp_path):
    """64 threads (no whole warpgroup): mma.sync as before, on sm_90a."""
    with config.override(cache_dir=str(tmp_path)):
        f = _gemm(256, 256, 256, 64, 64, 32, 2, 64)
        src = tegula.compile(f, out_idx=[-1], target="cuda:sm_90a").get_kernel_source()
        assert "tl::wgmma" not in src and "mma_m16n8k16" in src


@needs_compiler
@pytest.mark.parametrize("dim, bm, bn, threads", [(64, 128, 64, 128), (128, 128, 128, 256)])
def test_flash_attention_uses_register_a_wgmma(dim, bm, bn, threads, tmp_path):
    fa = _ex("flash_attention")
    with config.override(cache_dir=str(tmp_path)):
        k = tegula.compile(fa.flash_attention(1, 2, 256, dim, False, 1, bm, bn, 2, threads),
                           out_idx=[-1], target="cuda:sm_90a")
        src = k.get_kernel_source()
        assert "tl::wgmma_ss<" in src and "tl::wgmma_rs<" in src and "mma_m16n8k16" not in src


def test_cuda_emu_on_sm90a_runs_the_wgmma_lowering(rng):
    """The Hopper emulator runs the sm_90a lowering itself: its gemms are wgmma, not mma.sync."""
    f = _gemm(64, 64, 64, 64, 64, 32, 2, 128)
    k = tegula.compile(f, out_idx=[-1], target="cuda-emu:sm_90a")
    src = k.get_kernel_source()
    assert "wgmma" in src and "mma.sync" not in src
    a = rng.standard_normal((64, 64)).astype(np.float16)
    b = rng.standard_normal((64, 64)).astype(np.float16)
    c = k(a, b)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.linalg.norm(c.astype(np.float64) - ref) / np.linalg.norm(ref) < 2e-3


# ------------------------------------------------------------------------------- on the GPU

@pytest.mark.gpu
@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: "x".join(map(str, c[:5])) + f"-{c[5]}-{int(c[6])}{int(c[7])}")
@pytest.mark.parametrize("shape", [(512, 768, 256), (300, 400, 200)])
@pytest.mark.parametrize("tma", [True, False, "overlap"])
def test_wgmma_gemm_on_gpu(cfg, shape, tma, rng):
    torch = sm90a_gpu()
    bm, bn, bk, st, th, dtype, ta, tb = cfg
    M, N, K = shape
    if tma == "overlap":
        st = max(st, 3)
    pc = {True: {}, False: {PassConfigKey.TL_DISABLE_TMA_LOWER: True},
          "overlap": {PassConfigKey.TEGULA_WGMMA_OVERLAP: True}}[tma]
    k = tegula.compile(_gemm(M, N, K, bm, bn, bk, st, th, dtype, ta, tb), out_idx=[-1], target="cuda",
                       pass_configs=pc)
    src = k.get_kernel_source()
    assert "wgmma_ss" in src and ("tl::tma_load" in src) <= bool(tma)  # (TMA where the copies allow)
    tdt = getattr(torch, dtype)
    a64 = rng.standard_normal((K, M) if ta else (M, K))
    b64 = rng.standard_normal((N, K) if tb else (K, N))
    a = torch.tensor(a64, dtype=tdt, device="cuda")
    b = torch.tensor(b64, dtype=tdt, device="cuda")
    c = k(a, b)
    A = a.double().cpu().numpy()
    B = b.double().cpu().numpy()
    ref = (A.T if ta else A) @ (B.T if tb else B)
    out = c.double().cpu().numpy()
    assert np.isfinite(out).all()
    err = np.linalg.norm(out - ref) / np.linalg.norm(ref)
    assert err < (1e-2 if dtype == "bfloat16" else 2e-3), err


@pytest.mark.gpu
@pytest.mark.parametrize("dim, bm, bn, threads", [(64, 128, 64, 128), (128, 128, 128, 256)])
@pytest.mark.parametrize("causal", [False, True])
def test_wgmma_flash_attention_on_gpu(dim, bm, bn, threads, causal):
    torch = sm90a_gpu()
    fa = _ex("flash_attention")
    B, H, S = 1, 2, 300
    k = tegula.compile(fa.flash_attention(B, H, S, dim, causal, 1, bm, bn, 2, threads), out_idx=[-1], target="cuda")
    assert "wgmma_rs" in k.get_kernel_source()
    q, kk, v = (torch.randn(B, H, S, dim, device="cuda", dtype=torch.float16) for _ in range(3))
    o = k(q, kk, v).double()
    s = (q.double() @ kk.double().transpose(-1, -2)) / dim ** 0.5
    if causal:
        s = s.masked_fill(torch.ones(S, S, device="cuda").triu(1).bool(), float("-inf"))
    ref = torch.softmax(s, -1) @ v.double()
    assert torch.isfinite(o).all()
    assert float((o - ref).norm() / ref.norm()) < 5e-3


# ------------------------------------------------------------------------------- fp8

def _fp8_gemm(M, N, K, bm, bn, bk, st, th, da="float8_e4m3", db="float8_e4m3", out="bfloat16"):
    """C = A @ B^T with fp8 A (M, K) and B (N, K), float32 accumulation (TileLang's FP8 GEMM)."""

    @T.prim_func
    def main(A: T.Tensor((M, K), da), B: T.Tensor((N, K), db), C: T.Tensor((M, N), out)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=th) as (bx, by):
            A_s = T.alloc_shared((bm, bk), da)
            B_s = T.alloc_shared((bn, bk), db)
            C_l = T.alloc_fragment((bm, bn), "float32")
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=st):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[bx * bn, k * bk], B_s)
                T.gemm(A_s, B_s, C_l, transpose_B=True)
            T.copy(C_l, C[by * bm, bx * bn])

    return main


FP8_CONFIGS = [(128, 256, 128, 4, 256, "float8_e4m3", "float8_e4m3"),
               (64, 128, 64, 2, 128, "float8_e5m2", "float8_e4m3")]


@needs_compiler
@pytest.mark.parametrize("cfg", FP8_CONFIGS, ids=lambda c: "x".join(map(str, c[:5])) + f"-{c[5][-4:]}-{c[6][-4:]}")
def test_fp8_gemm_compiles_to_wgmma_k32(cfg, tmp_path):
    bm, bn, bk, st, th, da, db = cfg
    with config.override(cache_dir=str(tmp_path)):
        k = tegula.compile(_fp8_gemm(512, 512, 512, bm, bn, bk, st, th, da, db), out_idx=[-1], target="cuda:sm_90a")
        src = k.get_kernel_source()
        # a warp-specialized loop with wgmma in flight runs its last k-tile after the loop: two copies
        copies = 2 if "warpgroup_reg_alloc" in src and "wgmma_wait_group<1>" in src else 1
        assert src.count("tl::wgmma_ss_fp8<") == copies * bk // 32 * (bm // 64 // (th // 128))
        assert k.artifact.cubin


def test_fp8_gemm_with_a_transposed_keeps_cuda_cores(rng):
    """wgmma's fp8 form reads both operands K-major; other forms stay on the old path."""
    from tegula.backends.cuda.passes.lower_tile_ops.lower_wgmma import wgmma_layout
    from tegula.ir.visitor import post_order_visit

    f = _fp8_gemm(256, 256, 256, 64, 64, 64, 2, 128)
    gemms = []
    post_order_visit(f.body, lambda n: gemms.append(n) if type(n).__name__ == "Gemm" else None)
    import dataclasses

    assert wgmma_layout(gemms[0], 128) is not None
    assert wgmma_layout(dataclasses.replace(gemms[0], transpose_B=False), 128) is None


@pytest.mark.gpu
@pytest.mark.parametrize("cfg", FP8_CONFIGS, ids=lambda c: "x".join(map(str, c[:5])) + f"-{c[5][-4:]}-{c[6][-4:]}")
@pytest.mark.parametrize("shape", [(512, 768, 512), (300, 400, 256)])
def test_fp8_gemm_on_gpu(cfg, shape):
    torch = sm90a_gpu()
    bm, bn, bk, st, th, da, db = cfg
    M, N, K = shape
    k = tegula.compile(_fp8_gemm(M, N, K, bm, bn, bk, st, th, da, db), out_idx=[-1], target="cuda")
    assert "wgmma_ss_fp8" in k.get_kernel_source()
    tmap = {"float8_e4m3": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2}
    a = torch.randn(M, K, device="cuda").to(tmap[da])
    b = torch.randn(N, K, device="cuda").to(tmap[db])
    c = k(a, b).double()
    ref = a.double() @ b.double().T
    assert torch.isfinite(c).all()
    assert float((c - ref).norm() / ref.norm()) < 1e-2
