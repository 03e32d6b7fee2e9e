"""Repeated calls with torch tensors of a signature seen before skip re-validation, and only then."""
import numpy as np
import pytest

import tegula as tilelang
import tegula.language as T
from tegula import errors

torch = pytest.importorskip("torch")

n = T.dynamic("n")


@T.prim_func
def axpy(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32"), Z: T.Tensor((n,), "float32")):
    with T.Kernel(T.ceildiv(n, 32)) as bx:
        for i in T.Parallel(32):
            if bx * 32 + i < n:
                Z[bx * 32 + i] = 2.0 * X[bx * 32 + i] + Y[bx * 32 + i]


def test_repeated_calls_compute_fresh_results_and_still_check_new_signatures(rng):
    k = tilelang.compile(axpy, out_idx=[-1], target="cpu")
    for size in (40, 40, 40, 77, 77):
        x = torch.from_numpy(rng.standard_normal(size).astype(np.float32))
        y = torch.from_numpy(rng.standard_normal(size).astype(np.float32))
        z = k(x, y)
        np.testing.assert_allclose(z.numpy(), 2 * x.double().numpy() + y.double().numpy(), rtol=1e-6)
    assert len(k._plans) == 2
    with pytest.raises(errors.ArgumentError, match="'Y'"):
        k(torch.ones(40), torch.ones(41))
    with pytest.raises(errors.ArgumentError, match="float32"):
        k(torch.ones(40, dtype=torch.float64), torch.ones(40, dtype=torch.float64))
    with pytest.raises(errors.ArgumentError, match="contiguous"):
        k(torch.ones(80)[::2], torch.ones(40))


def test_outputs_are_poisoned_so_unwritten_elements_show(rng):
    @T.prim_func
    def half(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32"), Z: T.Tensor((64,), "int32")):
        with T.Kernel(1) as bx:
            for i in T.Parallel(32):
                Y[i] = X[i]
                Z[i] = 1

    k = tilelang.compile(half, out_idx=[1, 2], target="cpu")
    for x in (rng.standard_normal(64).astype(np.float32), torch.randn(64), torch.randn(64)):
        y, z = k(x)
        y, z = np.asarray(y), np.asarray(z)
        assert np.isnan(y[32:]).all() and not np.isnan(y[:32]).any()
        assert (z[32:] == -0x5A5A5A5A).all() and (z[:32] == 1).all()
