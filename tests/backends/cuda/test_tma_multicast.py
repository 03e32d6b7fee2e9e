"""Warp-specialized GEMMs in the 2-block clusters their author launches them in
(``T.Kernel(..., cluster_dims=(2, 1))``), sharing one operand's tiles by TMA multicast
(WarpSpecialize with ``analysis/tma_multicast.py``). The lowering on cuda-emu:sm_90a (a cluster's
blocks run together) against float64 (ragged M/N/K, fp16 and bf16, 2x1 and 1x2, strips of
``T.use_swizzle``), the rule, compile-only sm_90a through ptxas, and the GPU with ``-m gpu``."""
import sys
from pathlib import Path

import numpy as np
import pytest

import tegula
import tegula.language as T
from tegula.backends.cuda.compiler import available_backends
from tegula.backends.cuda.pipeline import lower
from tegula.errors import ConfigError, KernelTypeError, UnsupportedError
from tegula.passconfig import PassConfigKey
from tegula.target import Target

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cuda_gpu_util import sm90a_gpu  # noqa: E402
from gemm_util import check as _check, gemm as _gemm, inputs as _inputs  # noqa: E402

needs_compiler = pytest.mark.skipif(not available_backends(), reason="no CUDA compiler (NVRTC or nvcc) here")
SM90 = Target("cuda", "sm_90a")
WS = {PassConfigKey.TEGULA_WARP_SPECIALIZE: True}


# -- cuda-emu:sm_90a: a cluster's blocks side by side, against float64 ---------------------------

@pytest.mark.parametrize("M, N, K, cfg, dims, dtype, panel, grid", [
    # 4 x 2 tiles of 128x128, the last column ragged; K ragged, 4 k-tiles on a ring of 2, the
    # wgmma overlap (256 threads)
    (200, 400, 200, (128, 128, 64, 2, 256), (2, 1), "float16", None, "T.Kernel(4, 2, threads=384, cluster_dims="),
    (200, 400, 200, (128, 128, 64, 2, 256), (2, 1), "bfloat16", None, "T.Kernel(4, 2, threads=384, cluster_dims="),
    # 1x2: B shared by blocks one above the other; 2 x 4 tiles, the last row ragged
    (420, 200, 136, (128, 128, 32, 3, 256), (1, 2), "float16", None, "T.Kernel(2, 4, threads=384, cluster_dims="),
    # strips of 2 columns (RasterBlocks' order), 4 x 1 tiles
    (128, 480, 96, (128, 128, 32, 2, 256), (2, 1), "bfloat16", 2, "T.Kernel(4, 1, threads=384, cluster_dims="),
    # 64-row tiles of 128 threads (the split without the overlap): 32-row halves of A
    (64, 456, 160, (64, 128, 64, 3, 128), (2, 1), "float16", None, "T.Kernel(4, 1, threads=256, cluster_dims="),
], ids=["2x1-fp16-ragged", "2x1-bf16-ragged", "1x2-fp16-ragged", "2x1-strips", "64x128"])
def test_cluster_gemm_on_the_emulator_matches_float64(M, N, K, cfg, dims, dtype, panel, grid, rng):
    f = _gemm(M, N, K, *cfg, dtype=dtype, panel=panel, cluster_dims=dims)
    k = tegula.compile(f, out_idx=[-1], target="cuda-emu:sm_90a", pass_configs=WS)
    src = k.artifact.source
    assert f"cluster_dims={dims}" in src and grid in src
    assert src.count("tl::cluster_sync") == 2 and "tl::tma_load_multicast" in src
    a, b = _inputs(rng, M, N, K, dtype)
    _check(k(a, b), a, b)


def test_without_clusters_the_same_kernel_matches_and_loads_alone(rng):
    f = _gemm(200, 400, 200, 128, 128, 64, 2, 256)
    k = tegula.compile(f, out_idx=[-1], target="cuda-emu:sm_90a", pass_configs=WS)
    src = k.artifact.source
    assert "cluster" not in src and "T.Kernel(4, 2, threads=384)" in src
    a, b = _inputs(rng, 200, 400, 200, "float16")
    _check(k(a, b), a, b)


# -- the rule -------------------------------------------------------------------------------------

def test_the_multicast_takes_the_clusters_the_author_asks_for_where_the_rule_allows():
    # no clusters asked for: none chosen
    assert "cluster_dims=" not in lower(_gemm(4096, 4096, 1024, 128, 256, 64, 3, 256, panel=10), SM90, {}).script()
    big = _gemm(4096, 4096, 1024, 128, 256, 64, 3, 256, panel=10, cluster_dims=(2, 1))
    s = lower(big, SM90, {}).script()
    assert "cluster_dims=(2, 1)" in s and "cta_rank = T.tl::cluster_cta_rank()" in s
    # A is shared (its tiles follow blockIdx.y): each block loads 64 of its 128 rows; B alone
    assert "tma_load_multicast" in s and "by * 128 + cta_rank * 64" in s
    assert "T.tl::tma_load(T.address_of(B_s" in s
    # the empty barriers count the consumers of both blocks; each frees its peer's stage too
    assert s.count(", 264, ret=\"bool\"))") == 3 and "cta_rank ^ 1" in s
    # where the rule does not hold, the blocks run in the author's clusters as they are
    def plain(f, configs=None):
        s = lower(f, SM90, {} if configs is None else configs).script()
        return "cluster_dims=" in s and "tma_load_multicast" not in s and "cluster_sync" not in s

    # odd strips would split a pair between rows; 1x2 under a strip order; clusters of 4
    assert plain(_gemm(4096, 4096, 1024, 128, 256, 64, 3, 256, panel=5, cluster_dims=(2, 1)))
    assert plain(_gemm(4096, 4096, 1024, 128, 256, 64, 3, 256, panel=10, cluster_dims=(1, 2)))
    assert plain(_gemm(4096, 4096, 1024, 128, 256, 64, 3, 256, cluster_dims=(4, 1)))
    # a loop WarpSpecialize leaves
    assert plain(_gemm(4096, 4096, 1024, 128, 128, 32, 3, 128, cluster_dims=(2, 1)))
    # one tile along x: 1x2 (B shared) where launch order keeps the pair in one column
    s = lower(_gemm(4096, 256, 1024, 128, 256, 64, 3, 256, cluster_dims=(1, 2)), SM90, {}).script()
    # each block loads 32 of the B tile's 64 rows (along K); A alone
    assert "cluster_dims=(1, 2)" in s and "k * 64 + cta_rank * 32" in s and "T.tl::tma_load(T.address_of(A_s" in s


def test_the_deleted_cluster_switch_is_an_unknown_pass_config_key():
    with pytest.raises(ConfigError, match=r"unknown pass config key 'tegula\.cluster'"):
        lower(_gemm(4096, 4096, 1024, 128, 256, 64, 3, 256), SM90, {"tegula.cluster": True})


# -- compile-only sm_90a --------------------------------------------------------------------------

@needs_compiler
@pytest.mark.parametrize("cfg, dims, dtype", [((128, 256, 64, 3, 256), (2, 1), "bfloat16"),
                                              ((128, 256, 64, 4, 256), (1, 2), "float16"),
                                              ((64, 128, 64, 4, 128), (2, 1), "float16")])
def test_cluster_gemm_compiles_for_sm90a_keeping_setmaxnreg_and_wgmma_in_flight(cfg, dims, dtype):
    from tegula.backends.cuda.compiler import compile_cuda

    M = 8192 if cfg[0] == 128 else 64
    # 1x2 needs launch order (RasterBlocks' strips would part a pair)
    order = {PassConfigKey.TEGULA_BLOCK_RASTER: 0} if dims == (1, 2) else {}
    k = tegula.compile(_gemm(M, 8192, 8192, *cfg, dtype=dtype, panel=None if dims == (1, 2) else 10,
                             cluster_dims=dims), out_idx=[-1], target="cuda:sm_90a", pass_configs={**WS, **order})
    src = k.get_kernel_source()
    assert f"__cluster_dims__({dims[0]}, {dims[1]}, 1)" in src and "tl::tma_load_multicast(" in src
    assert "tl::mbarrier_arrive_cluster(" in src and src.count("tl::cluster_sync();") == 2
    log = compile_cuda(src, "sm_90a", options=["--ptxas-options=-v"]).log
    assert "C7507" not in log and "C7518" not in log and " 0 bytes spill stores" in log, log


# -- the GPU --------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("M, N, K, cfg, dims, dtype", [
    (1000, 1800, 520, (128, 256, 64, 3, 256), (2, 1), "float16"),        # 8 x 8 tiles; ragged
    (1000, 1288, 520, (128, 256, 64, 3, 256), (1, 2), "bfloat16"),       # 1x2, 8 rows of tiles
    (4096, 4096, 1024, (128, 256, 64, 4, 256), (2, 1), "bfloat16"),
    # 64 tiles in one row, the last ragged: cluster_plan declines the multicast here (the blocks
    # run in their clusters, each loading its own tiles), as the compile-only build shows
    (64, 8100, 1000, (64, 128, 64, 4, 128), (2, 1), "float16"),
])
def test_cluster_gemm_on_gpu(M, N, K, cfg, dims, dtype):
    torch = sm90a_gpu()
    tdt = getattr(torch, dtype)
    a = torch.randn(M, K, device="cuda", dtype=tdt)
    b = torch.randn(K, N, device="cuda", dtype=tdt)
    order = {PassConfigKey.TEGULA_BLOCK_RASTER: 0} if dims == (1, 2) else {}
    k = tegula.compile(_gemm(M, N, K, *cfg, dtype=dtype, cluster_dims=dims), out_idx=[-1], target="cuda",
                       pass_configs={**WS, **order})
    src = k.get_kernel_source()
    assert "__cluster_dims__" in src and ("tl::tma_load_multicast(" in src) == (M != 64)
    out = k(a, b).double()
    ref = a.double() @ b.double()
    assert torch.isfinite(out).all()
    assert ((out - ref).norm() / ref.norm()).item() < 4e-3


# -- T.Kernel(..., cluster_dims=): clusters the kernel's author asks for ---------------------------

def _scale(n, cluster_dims):
    @T.prim_func
    def main(A: T.Tensor((n, 64), "float32"), B: T.Tensor((n, 64), "float32")):
        with T.Kernel(n // 32, 2, threads=128, cluster_dims=cluster_dims) as (bx, by):
            S = T.alloc_shared((32, 32), "float32")
            T.copy(A[bx * 32, by * 32], S)
            for i, j in T.Parallel(32, 32):
                B[bx * 32 + i, by * 32 + j] = S[i, j] * 2.0 + 1.0

    return main


@pytest.mark.parametrize("target", ["cpu", "cuda-emu:sm_90a"])
@pytest.mark.parametrize("dims", [2, (2, 1), (1, 2), (2, 2)])
def test_a_kernel_launched_in_clusters_runs_its_blocks_in_them(target, dims, rng):
    k = tegula.compile(_scale(128, dims), target=target)
    a = rng.standard_normal((128, 64)).astype(np.float32)
    b = np.full_like(a, np.nan)
    k(a, b)
    np.testing.assert_allclose(b, a.astype(np.float64) * 2 + 1, rtol=1e-6)
    want = (dims, 1) if isinstance(dims, int) else dims
    assert f"threads=128, cluster_dims={tuple(want)})" in _scale(128, dims).script()


@needs_compiler
def test_cluster_dims_reach_the_cuda_source_and_the_gemm_multicasts_in_them():
    src = tegula.compile(_scale(128, (1, 2)), target="cuda:sm_90a").get_kernel_source()
    assert "__cluster_dims__(1, 2, 1)" in src and "tma_load_multicast" not in src
    for old in ("cuda:sm_80", "cuda-emu"):  # sm_80 has no clusters, on the GPU or the emulator
        with pytest.raises(UnsupportedError, match=r"cluster_dims=\) \(thread block clusters\) needs sm_90") as e:
            tegula.compile(_scale(128, (1, 2)), target=old)
        assert "test_tma_multicast.py" in str(e.value)

    @T.prim_func
    def gemm(A: T.Tensor((512, 256), "float16"), B: T.Tensor((256, 512), "float16"),
             C: T.Tensor((512, 512), "float16")):
        with T.Kernel(4, 4, threads=256, cluster_dims=(2, 1)) as (bx, by):
            A_s = T.alloc_shared((128, 64), "float16")
            B_s = T.alloc_shared((64, 128), "float16")
            C_l = T.alloc_fragment((128, 128), "float32")
            T.clear(C_l)
            for k in T.Pipelined(4, num_stages=2):
                T.copy(A[by * 128, k * 64], A_s)
                T.copy(B[k * 64, bx * 128], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * 128, bx * 128])

    s = lower(gemm, SM90, WS).script()
    assert "cluster_dims=(2, 1)" in s and "tma_load_multicast" in s
    # not warp-specialized: clusters of independent blocks
    s = lower(gemm, SM90, {PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True}).script()
    assert "cluster_dims=(2, 1)" in s and "tma_load_multicast" not in s


@pytest.mark.parametrize("dims, match", [((2, 1, 2), "clusters along the grid's z dimension"),
                                         ((4, 4), "a cluster of 16 blocks is more than the 8"),
                                         (3, r"grid dimension 0 \(4\) is not a multiple of the cluster's 3"),
                                         ((2, 0), "cluster_dims must be a positive int")])
def test_bad_cluster_dims_are_reported_at_the_kernel_line(dims, match):
    with pytest.raises(KernelTypeError, match=match) as e:
        _scale(128, dims)
    assert "test_tma_multicast.py" in str(e.value) and "cluster_dims=cluster_dims" in str(e.value)
