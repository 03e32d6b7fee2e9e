"""TileLang-Ascend's slice-buffer reduce: ``T.reduce_*(src, dst, dim, real_shape=[m, n])`` reduces
the leading m x n corner of a UB tile and writes its results to the leading elements of dst
(which may keep the physical [1, cols] shape); against float64 on the interpreter and the emulator."""
import numpy as np
import pytest

import tegula
import tegula.language as T
from tegula.errors import KernelTypeError, ShapeError

torch = pytest.importorskip("torch")

TARGETS = ["cpu", "ascend-emu:a2a3"]
REF = {"max": np.max, "sum": np.sum, "min": np.min}


def sliced(kind, R, C, m, n, dim, out_shape):
    op = getattr(T, f"reduce_{kind}")

    @T.prim_func
    def main(X: T.Tensor((R, C), "float32"), Y: T.Tensor(out_shape, "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_ub((R, C), "float32")
            y = T.alloc_ub(out_shape, "float32")
            with T.Scope("V"):
                if vid == 0:
                    T.copy(X, x)
                    T.copy(Y, y)
                    op(x, y, dim=dim, real_shape=[m, n])
                    T.copy(y, Y)
    return main


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("kind,R,C,m,n,dim,out", [
    ("max", 4, 8, 4, 4, -1, (1, 8)),     # rows of the left half, results in a physical row
    ("sum", 8, 16, 5, 0, -1, (5,)),      # 0 keeps the columns whole
    ("min", 8, 16, 3, 16, 0, (1, 16)),   # columns of the top 3 rows
    ("sum", 8, 16, 8, 8, 0, (16,)),
])
def test_real_shape_reduces_the_corner_against_float64(target, kind, R, C, m, n, dim, out):
    X = torch.randn(R, C)
    Y = torch.randn(*out)
    before = Y.double().numpy().reshape(-1).copy()
    tegula.compile(sliced(kind, R, C, m, n, dim, out), target=target,
                   pass_configs={"tl.ascend_auto_sync": True})(X, Y)
    corner = X.double().numpy()[:m, :(n or C)]
    ref = REF[kind](corner, axis=1 if dim == -1 else 0)
    got = Y.double().numpy().reshape(-1)
    np.testing.assert_allclose(got[:ref.size], ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got[ref.size:], before[ref.size:])   # the rest is kept


def test_real_shape_beyond_the_tile_is_a_located_error():
    with pytest.raises(ShapeError, match=r"real_shape\[1\] = 9"):
        sliced("max", 4, 8, 4, 9, -1, (1, 8))


def test_real_shape_must_be_two_extents():
    with pytest.raises(KernelTypeError, match="real_shape must be a list of two extents"):
        @T.prim_func
        def main(X: T.Tensor((4, 8), "float32"), Y: T.Tensor((4,), "float32")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                x = T.alloc_ub((4, 8), "float32")
                y = T.alloc_ub((4,), "float32")
                with T.Scope("V"):
                    T.copy(X, x)
                    T.reduce_max(x, y, dim=-1, real_shape=[4])
                    T.copy(y, Y)


def test_output_too_small_is_a_located_error():
    with pytest.raises(ShapeError, match="does not hold"):
        sliced("sum", 8, 16, 8, 8, -1, (1, 4))
