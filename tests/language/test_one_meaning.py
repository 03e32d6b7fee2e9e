"""What differed between targets has one meaning everywhere: non-positive or runtime T.Parallel
extents are errors; T.alloc_local is per thread, tile ops on it fill every thread's whole copy;
writing it inside T.Parallel is an error; lanes reading what other lanes write is an error."""
import numpy as np
import pytest

import tegula
import tegula.language as T
from tegula import errors
from tegula.backends.cuda import compiler
from tegula.target import gpu_available

EMU_TARGETS = ["cpu", "cuda-emu", "cuda-emu:sm_90a", pytest.param("cuda", marks=pytest.mark.gpu)]


def _gpu_or_skip(target):
    if target == "cuda" and not gpu_available():
        pytest.skip("no CUDA GPU")


@pytest.mark.parametrize("extent", [0, -8, -1])
def test_non_positive_parallel_extents_are_errors_on_every_target(extent):
    with pytest.raises(errors.ShapeError, match="extents must be positive") as ei:
        @T.prim_func
        def main(A: T.Tensor((64,), "float32")):
            with T.Kernel(1) as bx:
                for i in T.Parallel(extent):
                    A[0] = 1.0
    assert "test_one_meaning.py" in str(ei.value) and "for i in T.Parallel(extent)" in str(ei.value)


def test_runtime_parallel_extent_is_an_error():
    with pytest.raises(errors.ShapeError, match="compile-time constants"):
        @T.prim_func
        def main(A: T.Tensor((64,), "float32"), n: T.int32):
            with T.Kernel(1) as bx:
                for i in T.Parallel(n):
                    A[0] = 1.0


def _local_tile_ops():
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32"), S: T.Tensor((8,), "float32")):
        with T.Kernel(8, threads=32) as bx:
            loc = T.alloc_local((8,), "float32")
            total = T.alloc_local((1,), "float32")
            T.copy(A[bx * 8], loc)            # every thread copies the whole tile
            T.reduce_sum(loc, total, dim=0)
            for i in T.Parallel(8):
                B[bx * 8 + i] = loc[7 - i] * 2.0 + total[0]
            S[bx] = total[0]
    return main


@pytest.mark.parametrize("target", EMU_TARGETS)
def test_tile_ops_on_a_local_buffer_fill_every_threads_copy(target, rng):
    _gpu_or_skip(target)
    k = tegula.compile(_local_tile_ops(), out_idx=[1, 2], target=target)
    a = rng.standard_normal(64).astype(np.float32)
    if target == "cuda":
        import torch

        b, s = (x.cpu().numpy() for x in k(torch.from_numpy(a).cuda()))
    else:
        b, s = k(a)
    tiles = a.astype(np.float64).reshape(8, 8)
    np.testing.assert_allclose(np.asarray(s), tiles.sum(axis=1), rtol=1e-5, atol=1e-5)
    want = (tiles[:, ::-1] * 2.0 + tiles.sum(axis=1, keepdims=True)).reshape(64)
    np.testing.assert_allclose(np.asarray(b), want, rtol=1e-5, atol=1e-5)


@pytest.mark.skipif(not compiler.available_backends(), reason="neither NVRTC nor nvcc found")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_tile_ops_on_a_local_buffer_compile(arch):
    k = tegula.compile(_local_tile_ops(), out_idx=[1, 2], target=f"cuda:{arch}")
    assert k.artifact.cubin and "loc" in k.get_kernel_source()


def test_local_buffer_written_inside_parallel_is_an_error():
    with pytest.raises(errors.ScopeError, match="'loc' is written inside T.Parallel") as ei:
        @T.prim_func
        def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64) as bx:
                loc = T.alloc_local((1,), "float32")
                for i in T.Parallel(64):
                    loc[0] = A[i]
                    B[i] = loc[0]
    assert "loc[0] = A[i]" in str(ei.value)


def test_lanes_reading_what_other_lanes_write_is_an_error():
    with pytest.raises(errors.RaceError, match="writes 'B' and reads it at another index") as ei:
        @T.prim_func
        def main(B: T.Tensor((32, 32), "float32")):
            with T.Kernel(1, threads=128) as bx:
                for i, j in T.Parallel(32, 32):
                    B[i, j] = B[j, i] + 0.5
    assert "B[j, i]" in str(ei.value)


@pytest.mark.parametrize("target", ["cpu", "cuda-emu", "cuda-emu:sm_90a"])
def test_same_index_read_modify_write_is_fine(target, rng):
    @T.prim_func
    def main(B: T.Tensor((32, 32), "float32")):
        with T.Kernel(1, threads=128) as bx:
            for i, j in T.Parallel(32, 32):
                B[i, j] = B[i, j] * 2.0 + 0.5

    b = rng.standard_normal((32, 32)).astype(np.float32)
    want = b.astype(np.float64) * 2.0 + 0.5
    tegula.compile(main, target=target)(b)
    np.testing.assert_allclose(b, want, rtol=1e-6)
