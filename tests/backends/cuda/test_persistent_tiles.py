"""Warp-specialized GEMMs on a persistent grid (``tegula.persistent``, WarpSpecialize with
``passes/persistent_tiles.py``): a few blocks loop over the output tiles, their ring of stages
running on across tiles. The lowering on cuda-emu:sm_90a against float64 (ragged M/N/K, fp16 and
bf16, blocks with unequal tile counts, strips of ``T.use_swizzle``, with and without the wgmma
overlap), the rule, its errors, compile-only sm_90a through ptxas, and the GPU with ``-m gpu``."""
import sys
from pathlib import Path

import pytest

import tegula
from tegula.backends.cuda.compiler import available_backends
from tegula.backends.cuda.analysis.persistent_tiles import PERSISTENT_BLOCKS, tile_coords
from tegula.backends.cuda.pipeline import lower
from tegula.errors import ConfigError
from tegula.ir import expr as E
from tegula.ir.stmt import Kernel
from tegula.ir.visitor import post_order_visit
from tegula.passconfig import PassConfigKey
from tegula.target import Target

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cuda_gpu_util import sm90a_gpu  # noqa: E402
from gemm_util import check as _check, gemm as _gemm, inputs as _inputs  # noqa: E402

needs_compiler = pytest.mark.skipif(not available_backends(), reason="no CUDA compiler (NVRTC or nvcc) here")
SM90 = Target("cuda", "sm_90a")
PERSISTENT = "# annotation persistent = "


def _pc(blocks, **extra):
    return {PassConfigKey.TEGULA_PERSISTENT: blocks, **extra}


def _kernel(low) -> Kernel:
    ks: list = []
    post_order_visit(low.body, lambda n: ks.append(n) if isinstance(n, Kernel) else None)
    (k,) = ks
    return k


# -- cuda-emu:sm_90a: the lowering as the GPU runs it, against float64 ----------------------------

@pytest.mark.parametrize("M, N, K, cfg, blocks, dtype, panel", [
    # 3 x 3 tiles of 128x256 on 4 blocks (3, 2, 2, 2 tiles), 4 k-tiles (the last ragged) on a ring of 3
    (300, 520, 200, (128, 256, 64, 3, 256), 4, "float16", None),
    (300, 520, 200, (128, 256, 64, 3, 256), 4, "bfloat16", None),
    # strips of 2 columns over a grid 3 wide (the last strip 1 wide), 2 blocks of 3 tiles
    (256, 320, 96, (128, 128, 32, 2, 256), 2, "float16", 2),
    # 64-row tiles of 128 threads: the split without the wgmma overlap, a ring of 4 over 3 k-tiles
    # (the last ragged); 3 x 3 tiles on 3 blocks
    (130, 296, 160, (64, 128, 64, 4, 128), 3, "bfloat16", None),
], ids=["128x256-fp16", "128x256-bf16", "strips", "64x128-no-overlap"])
def test_persistent_gemm_on_the_emulator_matches_float64(M, N, K, cfg, blocks, dtype, panel, rng):
    f = _gemm(M, N, K, *cfg, dtype=dtype, panel=panel)
    pc = _pc(blocks, **{PassConfigKey.TEGULA_WARP_SPECIALIZE: True})
    k = tegula.compile(f, out_idx=[-1], target="cuda-emu:sm_90a", pass_configs=pc)
    src = k.artifact.source
    assert f"T.Kernel({blocks}, threads={cfg[4] + 128}) as pid" in src and "_t_tile = pid + " in src
    a, b = _inputs(rng, M, N, K, dtype)
    _check(k(a, b), a, b)


def test_tiles_map_to_the_blocks_the_launch_order_would_run():
    """tile_coords follows the generated code's strips: every (bx, by) once, in strip order."""
    f = _gemm(8 * 128, 5 * 128, 64, 128, 128, 64, 2, 256, panel=2)
    k = _kernel(f)
    seen = []
    for tile in range(5 * 8):
        bx, by = (E.as_expr(x) for x in tile_coords(k, E.const(tile)))
        seen.append((bx.value, by.value))
    assert sorted(seen) == sorted((x, y) for x in range(5) for y in range(8))
    assert seen[:4] == [(0, 0), (1, 0), (0, 1), (1, 1)]  # a strip of 2 columns, walked row by row
    assert seen[32:35] == [(4, 0), (4, 1), (4, 2)]      # the last strip, 1 column wide


# -- the rule, the option -------------------------------------------------------------------------

def test_persistent_grid_is_off_by_default_and_taken_where_the_grid_is_more_than_a_wave():
    big = _gemm(4096, 4096, 1024, 128, 256, 64, 3, 256)  # 16 x 32 tiles
    assert PERSISTENT not in lower(big, SM90, {}).script()
    s = lower(big, SM90, _pc(True)).script()
    assert f"T.Kernel({PERSISTENT_BLOCKS}, threads=384) as pid" in s
    assert "k_t_tile = pid + k_t * 132" in s and "for k_t in T.serial((643 - pid) // 132)" in s
    # the ring runs on across tiles: the stage and parity of iteration t * n + k
    assert "k_bars[(k_t * 16 + k) % 3 + 3]" in s.replace("T.address_of(", "")
    small = _gemm(1024, 1024, 1024, 128, 256, 64, 3, 256)  # 32 tiles: one wave
    assert PERSISTENT not in lower(small, SM90, _pc(True)).script()
    assert "T.Kernel(8, threads=384) as pid" in lower(small, SM90, _pc(8)).script()
    # a loop WarpSpecialize leaves (128x128 tiles of 128 threads), and the sm_80 path: unchanged
    corpus = _gemm(4096, 4096, 1024, 128, 128, 32, 3, 128)
    assert PERSISTENT not in lower(corpus, SM90, _pc(True)).script()
    # attention split by WarpSpecialize keeps one block per query tile
    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
    try:
        import flash_attention as fa
    finally:
        sys.path.pop(0)
    for causal in (False, True):
        attn = fa.flash_attention(2, 16, 2048, 128, causal, 1, 128, 128, 2, 256)  # 16 x 32 blocks
        s = lower(attn, SM90, _pc(True, **{PassConfigKey.TEGULA_WARP_SPECIALIZE: True})).script()
        assert "# warp_specialize" in s and PERSISTENT not in s
    assert PERSISTENT not in lower(big, Target("cuda", "sm_80"), _pc(True)).script()


def test_the_last_k_tile_frees_both_stages_it_holds():
    """With one k-tile of wgmma in flight, the last k-tile after the loop frees the previous
    stage and its own (the producer goes on to the next tile), after wait_group 0."""
    s = lower(_gemm(4096, 4096, 1024, 128, 256, 64, 3, 256), SM90, _pc(True)).script().replace("T.address_of(", "")
    cons = s[s.index("# warp_specialize: (0, 256, 1)"):]
    last = cons[cons.rindex("wgmma_wait_group(template=(0,)"):cons.index("tile_op: T.copy")]
    frees = [line.split("mbarrier_arrive(")[1].split(",")[0] for line in last.splitlines() if "mbarrier_arrive" in line]
    # stages (t * 16 + 14) % 3 and (t * 16 + 15) % 3 (as folded), of the empty half of the ring
    assert frees == ["k_bars[(k_t * 16 + 2) % 3 + 3]", "k_bars[k_t * 16 % 3 + 3]"], frees
    # without the persistent grid the last k-tile frees nothing (the producer has finished)
    plain = lower(_gemm(4096, 4096, 1024, 128, 256, 64, 3, 256), SM90, {}).script()
    plain = plain[plain.index("# warp_specialize: (0, 256, 1)"):]
    assert "mbarrier_arrive" not in plain[plain.rindex("wgmma_wait_group(template=(0,)"):]


@pytest.mark.parametrize("bad", [-1, 2.5, "yes"])
def test_a_bad_persistent_option_is_a_config_error(bad):
    with pytest.raises(ConfigError, match=r"tegula\.persistent must be a bool or a number of blocks") as e:
        lower(_gemm(4096, 4096, 1024, 128, 256, 64, 3, 256), SM90, _pc(bad))
    assert "132" in str(e.value)  # the hint


# -- compile-only sm_90a --------------------------------------------------------------------------

@needs_compiler
@pytest.mark.parametrize("cfg, blocks", [((128, 256, 64, 3, 256), True), ((64, 128, 64, 4, 128), 32)])
def test_persistent_gemm_compiles_for_sm90a_keeping_setmaxnreg_and_wgmma_in_flight(cfg, blocks):
    from tegula.backends.cuda.compiler import compile_cuda

    M = 8192 if cfg[0] == 128 else 64  # 64 x 8192: 64 tiles, on 32 blocks
    k = tegula.compile(_gemm(M, 8192, 8192, *cfg, panel=10), out_idx=[-1], target="cuda:sm_90a",
                       pass_configs=_pc(blocks, **{PassConfigKey.TEGULA_WARP_SPECIALIZE: True}))
    src = k.get_kernel_source()
    assert "tl::warpgroup_reg_alloc<232>" in src and "blockIdx.y" not in src
    log = compile_cuda(src, "sm_90a", options=["--ptxas-options=-v"]).log
    assert "C7507" not in log and "C7518" not in log and " 0 bytes spill stores" in log, log


# -- the GPU --------------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("M, N, K, cfg, dtype", [(1000, 776, 520, (128, 256, 64, 3, 256), "float16"),
                                                 (4096, 4096, 1024, (128, 256, 64, 3, 256), "bfloat16"),
                                                 (64, 8192, 1000, (64, 128, 64, 4, 128), "float16")])
def test_persistent_gemm_on_gpu(M, N, K, cfg, dtype, rng):
    torch = sm90a_gpu()
    tdt = getattr(torch, dtype)
    a = torch.randn(M, K, device="cuda", dtype=tdt)
    b = torch.randn(K, N, device="cuda", dtype=tdt)
    for blocks in (True, 3):
        k = tegula.compile(_gemm(M, N, K, *cfg, dtype=dtype), out_idx=[-1], target="cuda",
                           pass_configs=_pc(blocks, **{PassConfigKey.TEGULA_WARP_SPECIALIZE: True}))
        out = k(a, b).double()
        ref = a.double() @ b.double()
        assert torch.isfinite(out).all()
        assert ((out - ref).norm() / ref.norm()).item() < 4e-3
