"""T.copy into pipelined shared tiles through TMA (sm_90a): the TmaPipeline pass, its lowering,
tensor-map parameters; compile-only here, results on the GPU in test_wgmma.py's gpu tests."""
import sys
from pathlib import Path

import pytest

import tegula
from tegula import config
from tegula.backends.cuda.compiler import available_backends
from tegula.backends.cuda.pipeline import lower
from tegula.ir.visitor import post_order_visit
from tegula.passconfig import PassConfigKey
from tegula.target import Target

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_wgmma import _ex, _gemm  # noqa: E402

needs_compiler = pytest.mark.skipif(not available_backends(), reason="no CUDA compiler (NVRTC or nvcc) here")


# these tests are TmaPipeline's: the kernels WarpSpecialize would take first are left to it
NO_WS = {PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True}


def _kernel(func, pass_configs=None):
    low = lower(func, Target("cuda", "sm_90a"), {**NO_WS, **(pass_configs or {})})
    found = []
    post_order_visit(low.body, lambda n: found.append(n) if type(n).__name__ == "Kernel" else None)
    return found[0]


def test_pipelined_gemm_loads_through_tma_with_swizzled_boxes():
    k = _kernel(_gemm(512, 512, 512, 128, 256, 64, 3, 256))
    maps = {m.buffer.name: m for m in k.annotations["tma_maps"]}
    # A_s (128 x 64 fp16) is one 128-byte-swizzled block; B_s (64 x 256) four blocks of 64 columns
    assert maps["A"].box == (64, 128) and maps["A"].swizzle == 3
    assert maps["B"].box == (64, 64) and maps["B"].swizzle == 3
    offs = {b.name: o for b, o in k.annotations["smem_offsets"].items()}
    assert offs["A_s"] % 1024 == 0 and offs["B_s"] % 1024 == 0 and "k_full" in offs


def test_tma_is_off_with_the_pass_config_and_on_sm80():
    f = _gemm(512, 512, 512, 128, 128, 32, 3, 128)
    assert "tma_maps" not in _kernel(f, {PassConfigKey.TL_DISABLE_TMA_LOWER: True}).annotations
    low = lower(f, Target("cuda", "sm_80"), {})
    assert "tma_maps" not in low.script() and "mbarrier" not in low.script()


def test_copies_tma_cannot_do_keep_cp_async():
    """K = 70 halves: rows of 140 bytes, not a multiple of 16 -> cp.async as before."""
    k = _kernel(_gemm(256, 256, 70, 128, 128, 32, 3, 128))
    assert [m.buffer.name for m in k.annotations["tma_maps"]] == ["C"]  # only the epilogue's TMA store


def _fixed_b_gemm(M, N, K, bm, bn, bk, S):
    """C = sum over k-tiles of A's k-tile @ B (bk x N, loaded once by the threads): B_s is a
    generic write that wgmma reads, A_s only TMA's."""
    import tegula.language as T

    @T.prim_func
    def g(A: T.Tensor((M, K), "float16"), B: T.Tensor((bk, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            C_l = T.alloc_fragment((bm, bn), "float32")
            T.clear(C_l)
            T.copy(B[0, bx * bn], B_s, disable_tma=True)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=S):
                T.copy(A[by * bm, k * bk], A_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * bm, bx * bn])

    return g


def test_wgmma_on_tiles_only_tma_writes_needs_no_proxy_fence():
    """Tiles the copy engine fills and only gemms read are in the async proxy already: no
    fence.proxy.async before their wgmma (TmaPipeline and WarpSpecialize alike); a tile written
    by the threads too, or fed by cp.async, keeps it."""
    f = _gemm(512, 512, 512, 128, 256, 64, 4, 256)
    for pc in (NO_WS, {}):
        s = lower(f, Target("cuda", "sm_90a"), pc).script()
        assert "tl::tma_load" in s and "tl::wgmma_ss" in s and "fence_proxy_async" not in s
    s = lower(f, Target("cuda", "sm_90a"), {PassConfigKey.TL_DISABLE_TMA_LOWER: True}).script()
    assert "tl::wgmma_ss" in s and "fence_proxy_async" in s
    s = lower(_fixed_b_gemm(256, 256, 256, 64, 64, 64, 3), Target("cuda", "sm_90a"), NO_WS).script()
    assert "tl::tma_load" in s and "tl::wgmma_ss" in s and "fence_proxy_async" in s


def test_wgmma_on_a_tile_the_threads_wrote_runs_fenced_on_the_emulator():
    import numpy as np

    rng = np.random.default_rng()
    M, N, K, bk = 128, 128, 192, 64
    k = tegula.compile(_fixed_b_gemm(M, N, K, 64, 64, bk, 2), target="cuda-emu:sm_90a", pass_configs=NO_WS)
    assert "fence_proxy_async" in k.artifact.source
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((bk, N)).astype(np.float16)
    c = np.full((M, N), np.nan, np.float32)
    k(a, b, c)
    ref = a.astype(np.float64).reshape(M, K // bk, bk).sum(axis=1) @ b.astype(np.float64)
    assert np.abs(c - ref).max() < 1e-3 * np.abs(ref).max()


@needs_compiler
@pytest.mark.parametrize("cfg", [(128, 256, 64, 3, 256, "float16"), (64, 128, 32, 4, 128, "bfloat16")])
def test_tma_gemm_compiles_with_tensor_map_parameters(cfg, tmp_path):
    bm, bn, bk, st, th, dtype = cfg
    with config.override(cache_dir=str(tmp_path)):
        k = tegula.compile(_gemm(1024, 1024, 1024, bm, bn, bk, st, th, dtype), out_idx=[-1], target="cuda:sm_90a")
        src = k.get_kernel_source()
        assert "__grid_constant__ tl::TensorMap" in src and "tl::tma_load(" in src
        assert "mbarrier_wait" in src and "cp_async" not in src
        kinds = [p.kind for p in k.artifact.module.params]
        assert kinds.count("tmap") == 3 and kinds[:3] == ["buffer"] * 3  # A, B loaded, C stored
        assert k.artifact.cubin


@needs_compiler
def test_flash_attention_loads_kv_through_tma(tmp_path):
    fa = _ex("flash_attention")
    with config.override(cache_dir=str(tmp_path)):
        k = tegula.compile(fa.flash_attention(1, 2, 256, 64, True, 1, 128, 64, 2, 128), out_idx=[-1],
                           target="cuda:sm_90a")
        src = k.get_kernel_source()
        assert src.count("__grid_constant__ tl::TensorMap") == 2 and "tl::wgmma_rs<" in src


@needs_compiler
def test_wgmma_overlap_keeps_one_k_tile_in_flight(tmp_path):
    """tegula.wgmma_overlap: wait_group 1 in the loop, loads S - 2 ahead, a drain after the loop."""
    f = _gemm(1024, 1024, 1024, 128, 256, 64, 4, 256)
    with config.override(cache_dir=str(tmp_path)):
        src = tegula.compile(f, out_idx=[-1], target="cuda:sm_90a",
                             pass_configs={**NO_WS, PassConfigKey.TEGULA_WGMMA_OVERLAP: True}).get_kernel_source()
        loop = src[src.index("for (int k = 0"):]
        assert "wgmma_wait_group<1>" in loop and "if (k + 2 < 16)" in loop
        tail = loop[loop.index("wgmma_wait_group<1>"):]
        assert "wgmma_wait_group<0>" in tail  # drained after the loop, before the epilogue
        off = tegula.compile(f, out_idx=[-1], target="cuda:sm_90a",
                             pass_configs={**NO_WS, PassConfigKey.TEGULA_WGMMA_OVERLAP: False}).get_kernel_source()
        assert "wgmma_wait_group<1>" not in off and "if (k + 3 < 16)" in off
        # left to the pass: on for this 128x256 tile with 4 stages, off for 64x128 or 3 stages
        auto = tegula.compile(f, out_idx=[-1], target="cuda:sm_90a", pass_configs=NO_WS).get_kernel_source()
        assert "wgmma_wait_group<1>" in auto
        for small in (_gemm(1024, 1024, 1024, 64, 128, 64, 4, 128), _gemm(1024, 1024, 1024, 128, 256, 64, 3, 256)):
            assert "wgmma_wait_group<1>" not in tegula.compile(small, out_idx=[-1], target="cuda:sm_90a",
                                                               pass_configs=NO_WS).get_kernel_source()


@needs_compiler
def test_wgmma_overlap_leaves_loops_that_read_the_accumulator(tmp_path):
    fa = _ex("flash_attention")
    with config.override(cache_dir=str(tmp_path)):
        src = tegula.compile(fa.flash_attention(1, 2, 256, 64, False, 1, 128, 64, 3, 128), out_idx=[-1],
                             target="cuda:sm_90a",
                             pass_configs={PassConfigKey.TEGULA_WGMMA_OVERLAP: True,
                                           PassConfigKey.TEGULA_SOFTMAX_OVERLAP: False}).get_kernel_source()
        assert "wgmma_wait_group<1>" not in src and "tl::tma_load(" in src


@needs_compiler
def test_a_cached_build_keeps_its_tensor_map_parameters(tmp_path):
    """A build loaded from the disk cache skips lowering, where the tensor maps are made: they come
    back from the entry's metadata (without them the launch passes too few parameters)."""
    f = _gemm(512, 512, 512, 128, 128, 64, 3, 256)
    with config.override(cache_dir=str(tmp_path)):
        first = tegula.compile(f, out_idx=[-1], target="cuda:sm_90a")
        again = tegula.compile(_gemm(512, 512, 512, 128, 128, 64, 3, 256), out_idx=[-1], target="cuda:sm_90a")
    assert again.artifact.metadata["cached"]
    want = [(p.name, p.kind) for p in first.artifact.module.params]
    assert [(p.name, p.kind) for p in again.artifact.module.params] == want and ("A_tmap_0", "tmap") in want
    for p, q in zip(first.artifact.module.params, again.artifact.module.params):
        if p.kind == "tmap":
            assert (p.source[0], p.source[1].box, p.source[1].swizzle, p.source[1].buffer.name) == \
                (q.source[0], q.source[1].box, q.source[1].swizzle, q.source[1].buffer.name)
