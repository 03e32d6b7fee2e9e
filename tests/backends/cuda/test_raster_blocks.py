"""RasterBlocks (sm_90a): GEMM-shaped grids whose operands exceed L2 launch in strips of columns
(``T.use_swizzle``'s order); results are unchanged, on the emulator and on the GPU."""
import sys
from pathlib import Path

import numpy as np
import pytest

import tegula
import tegula.language as T
from tegula.backends.cuda.passes.raster_blocks import operand_bytes, raster_panel
from tegula.backends.cuda.pipeline import lower
from tegula.ir.printer import script
from tegula.ir.stmt import Kernel
from tegula.ir.visitor import post_order_visit
from tegula.passconfig import PassConfigKey
from tegula.target import Target

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cuda_gpu_util import sm90a_gpu  # noqa: E402
from test_wgmma import _ex, _fp8_gemm, _gemm, needs_compiler  # noqa: E402

SM90 = Target("cuda", "sm_90a")
RASTER = PassConfigKey.TEGULA_BLOCK_RASTER


def _swizzle(func, target=SM90, configs=None):
    ks: list = []
    post_order_visit(lower(func, target, configs or {}), lambda n: ks.append(n) if isinstance(n, Kernel) else None)
    return ks[0].annotations.get("swizzle")


def _kernel(func) -> Kernel:
    ks: list = []
    post_order_visit(func.body, lambda n: ks.append(n) if isinstance(n, Kernel) else None)
    return ks[0]


def test_operands_larger_than_l2_launch_in_strips():
    # fp8 8192^3, 128x256 tiles: a y-tile step is 16 KB, an x-tile step 32 KB; 128 MB of operands
    f = _fp8_gemm(8192, 8192, 8192, 128, 256, 128, 4, 256)
    assert operand_bytes(_kernel(f)) == (128 * 128, 256 * 128, 64)
    # half the square wave: round(sqrt(132 * 16 / 32) / 2) = 4
    assert _swizzle(f) == (4, "row")
    # fp16 64x64 tiles, 64 MB of operands: round(sqrt(132) / 2) = 6
    assert _swizzle(_gemm(4096, 4096, 4096, 64, 64, 32, 3, 128)) == (6, "row")


def test_operands_that_fit_in_l2_keep_launch_order():
    # fp8 4096^3: 32 MB of operands, where launch order measured faster
    assert _swizzle(_fp8_gemm(4096, 4096, 4096, 128, 256, 128, 4, 256)) is None
    assert _swizzle(_gemm(512, 512, 512, 128, 128, 32, 3, 128)) is None


def test_pass_config_sets_the_strip_or_turns_it_off():
    big = _fp8_gemm(8192, 8192, 8192, 128, 256, 128, 4, 256)
    assert _swizzle(big, configs={RASTER: 0}) is None
    assert _swizzle(big, configs={RASTER: False}) is None
    assert _swizzle(big, configs={RASTER: True}) == _swizzle(big) == (4, "row")  # True: the automatic width
    # an explicit width applies at any size; a strip as wide as the grid is launch order
    assert _swizzle(_fp8_gemm(1024, 1024, 1024, 128, 128, 128, 2, 128), configs={RASTER: 3}) == (3, "row")
    assert _swizzle(_fp8_gemm(1024, 1024, 1024, 128, 128, 128, 2, 128), configs={RASTER: 8}) is None
    # the sm_80 path is unchanged
    assert _swizzle(_gemm(4096, 4096, 4096, 64, 64, 32, 3, 128), Target("cuda", "sm_80")) is None


@pytest.mark.parametrize("bad", [-1, "4", 2.5])
def test_a_bad_strip_width_is_a_config_error(bad):
    from tegula.errors import ConfigError

    with pytest.raises(ConfigError, match="tegula.block_raster must be a strip width") as e:
        _swizzle(_gemm(512, 512, 512, 128, 128, 32, 3, 128), configs={RASTER: bad})
    assert "launch order" in str(e.value)


def test_kernels_choosing_their_order_and_other_shapes_are_left():
    gemm = _ex("gemm")  # writes T.use_swizzle(panel_size=10)
    assert _swizzle(gemm.matmul.get_tir(8192, 8192, 8192, 128, 256, 64, 3, 256)) == (10, "row")
    fa = _ex("flash_attention")  # one operand per (head, batch), the query tile on both block indices
    assert raster_panel(_kernel(fa.flash_attention(1, 16, 16384, 128, False, 1, 128, 128, 2, 256))) == 0


def _gemm_variant(M, N, K, bm, bn, bk, deep_lets=False, swizzle_off=False):
    """A fp16 GEMM whose A tile starts at ``((by * 2) * (bm // 4)) * 2`` (three lets between
    blockIdx.y and the tile) with ``deep_lets``, and that writes ``T.use_swizzle(6,
    enable=False)`` with ``swizzle_off``."""
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            C_l = T.alloc_fragment((bm, bn), "float32")
            if swizzle_off:
                T.use_swizzle(6, enable=False)
            m0 = by * bm
            if deep_lets:
                row = by * 2
                half = row * (bm // 4)
                m0 = half * 2
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[m0, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[m0, bx * bn])

    return main


def test_index_lets_are_seen_through_at_any_depth():
    deep = _gemm_variant(4096, 4096, 4096, 64, 64, 32, deep_lets=True)
    assert "half = row * 16" in script(deep)
    assert operand_bytes(_kernel(deep)) == (64 * 32 * 2, 32 * 64 * 2, 128)
    assert _swizzle(deep) == (6, "row")


def test_use_swizzle_disabled_keeps_launch_order(rng):
    # the user's explicit "no" wins over the automatic strips and over tegula.block_raster
    off = _gemm_variant(4096, 4096, 4096, 64, 64, 32, swizzle_off=True)
    assert _swizzle(_gemm(4096, 4096, 4096, 64, 64, 32, 3, 128)) == (6, "row")
    assert _swizzle(off) is None
    assert _swizzle(off, configs={RASTER: 3}) is None
    # the choice is in the printed IR (the disk cache key tells the two kernels apart)
    assert 'T.use_swizzle(6, order="row", enable=False)' in script(off)
    # and the kernel computes the same on the emulator
    M, N, K = 128, 192, 64
    k = tegula.compile(_gemm_variant(M, N, K, 64, 64, 32, swizzle_off=True), out_idx=[-1], target="cuda-emu:sm_90a")
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.abs(k(a, b).astype(np.float64) - ref).max() / np.abs(ref).max() < 2e-3


@needs_compiler
def test_generated_code_walks_strips(tmp_path):
    from tegula import config

    with config.override(cache_dir=str(tmp_path)):
        k = tegula.compile(_fp8_gemm(8192, 8192, 8192, 128, 256, 128, 4, 256), out_idx=[-1], target="cuda:sm_90a")
    src = k.get_kernel_source()
    assert "block rasterization: strips of 4 columns" in src
    assert k.artifact.cubin


@pytest.mark.parametrize("panel", [2, 3])
def test_strips_compute_the_same_on_the_emulator(rng, panel):
    # a 5 x 3 grid of 64 x 64 tiles: strips of 2 or 3 columns, the last one narrower
    M, N, K = 192, 320, 96
    k = tegula.compile(_gemm(M, N, K, 64, 64, 32, 2, 128, dtype="float16"), out_idx=[-1], target="cuda-emu:sm_90a",
                       pass_configs={RASTER: panel})
    assert k.artifact.func is not None
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = k(a, b)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert np.abs(c.astype(np.float64) - ref).max() / np.abs(ref).max() < 2e-3


@pytest.mark.gpu
@pytest.mark.parametrize("panel", [None, 3])
def test_fp8_gemm_in_strips_on_gpu(panel):
    torch = sm90a_gpu()
    M, N, K = 1100, 1700, 384  # ragged: a partial last strip and partial tiles
    cfg = {} if panel is None else {RASTER: panel}
    k = tegula.compile(_fp8_gemm(M, N, K, 128, 256, 128, 3, 256), out_idx=[-1], target="cuda", pass_configs=cfg)
    a = torch.randn(M, K, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(N, K, device="cuda").to(torch.float8_e4m3fn)
    c = k(a, b).double()
    ref = a.double() @ b.double().T
    assert ("block rasterization" in k.get_kernel_source()) == (panel is not None)
    assert float((c - ref).norm() / ref.norm()) < 1e-2
