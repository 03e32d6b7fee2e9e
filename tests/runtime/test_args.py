"""Call-time argument checks: every bad call is an ArgumentError naming the parameter."""
import numpy as np
import pytest

import tegula as tilelang
import tegula.language as T
from tegula import config, errors
from tegula.target import Target, gpu_available, parse_target

torch = pytest.importorskip("torch")


@T.prim_func
def axpby(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32"), a: T.float32,
          Z: T.Tensor((64,), "float32")):
    with T.Kernel(2, threads=32) as bx:
        for i in T.Parallel(32):
            Z[bx * 32 + i] = a * X[bx * 32 + i] + Y[bx * 32 + i]


@T.prim_func
def scale_in_place(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
    with T.Kernel(1, threads=64) as bx:
        for i in T.Parallel(64):
            Y[i] = 3.0 * X[i]


def _ref(x, y, a):
    return a * x.astype(np.float64) + y.astype(np.float64)


@pytest.mark.parametrize("target", ["cpu", "cuda-emu"])
def test_inputs_by_parameter_name_in_any_order(target, rng):
    k = tilelang.compile(axpby, out_idx=[-1], target=target)
    x, y = (rng.standard_normal(64).astype(np.float32) for _ in range(2))
    a = float(rng.standard_normal())
    for z in (k(x, y, a), k(X=x, Y=y, a=a), k(a=a, Y=y, X=x), k(x, a=a, Y=y)):
        np.testing.assert_allclose(z, _ref(x, y, a), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("call, match", [
    (lambda k, x: k(x, x, 1.0, Z=x), "'Z' is an output"),
    (lambda k, x: k(x, x, b=1.0), "no parameter 'b'"),
    (lambda k, x: k(x, Y=x, y=x, a=1.0), "(?s)no parameter 'y'.*did you mean 'Y'"),
    (lambda k, x: k(x, X=x, a=1.0), "'X' given both by position and by name"),
    (lambda k, x: k(X=x, a=1.0), "missing 'Y'"),
])
def test_bad_keyword_arguments_are_refused_naming_the_parameter(call, match, rng):
    k = tilelang.compile(axpby, out_idx=[-1], target="cpu")
    with pytest.raises(errors.ArgumentError, match=match):
        call(k, rng.standard_normal(64).astype(np.float32))


@pytest.mark.parametrize("target", ["cpu", "cuda-emu"])
def test_requires_grad_tensors_bind(target, rng):
    k = tilelang.compile(axpby, out_idx=[-1], target=target)
    x = torch.from_numpy(rng.standard_normal(64).astype(np.float32)).requires_grad_()
    y = torch.from_numpy(rng.standard_normal(64).astype(np.float32)).requires_grad_()
    z = k(x, y, 0.5)
    np.testing.assert_allclose(z.numpy(), _ref(x.detach().numpy(), y.detach().numpy(), 0.5),
                               rtol=1e-5, atol=1e-6)
    out = torch.full((64,), float("nan"), requires_grad=True)
    k2 = tilelang.compile(scale_in_place, target=target)
    k2(x, out)  # writes through to the storage of a tensor that requires grad
    np.testing.assert_allclose(out.detach().numpy(), 3.0 * x.detach().numpy().astype(np.float64), rtol=1e-6)


def test_read_only_numpy_array_that_the_kernel_writes_is_refused(rng):
    k = tilelang.compile(scale_in_place, target="cpu")
    x = rng.standard_normal(64).astype(np.float32)
    y = np.full(64, np.nan, np.float32)
    y.flags.writeable = False
    with pytest.raises(errors.ArgumentError, match="argument 'Y': the numpy array is read-only"):
        k(x, y)
    x.flags.writeable = False  # read-only inputs the kernel only reads are fine
    y = np.full(64, np.nan, np.float32)
    k(x, y)
    np.testing.assert_allclose(y, 3.0 * x.astype(np.float64), rtol=1e-6)


@pytest.mark.skipif(gpu_available(), reason="checks the behaviour on a machine without a GPU")
def test_numpy_into_a_cuda_kernel_without_a_gpu_names_the_parameter(rng):
    k = tilelang.compile(axpby, out_idx=[-1], target="cuda:sm_80")
    x = rng.standard_normal(64).astype(np.float32)
    with pytest.raises(errors.ArgumentError, match="argument 'X': a numpy array cannot be moved to the GPU"):
        k(x, x, 1.0)
    with pytest.raises(errors.ArgumentError, match="argument 'X': the tensor is on cpu"):
        k(torch.from_numpy(x), torch.from_numpy(x), 1.0)


def test_tegula_target_is_the_default_target():
    for value, want in (("cpu", Target("cpu")), ("cuda-emu", Target("cuda-emu")),
                        ("cuda:sm_90a", Target("cuda", "sm_90a"))):
        with config.override(default_target=value):
            assert parse_target("auto") == want
            assert parse_target(None) == want
            assert parse_target("cpu") == Target("cpu")  # an explicit target wins
    env = config.from_env({"TEGULA_TARGET": " cuda-emu "})
    assert env.default_target == "cuda-emu"


def test_tegula_target_decides_where_a_default_kernel_runs(rng):
    with config.override(default_target="cuda-emu"):
        k = tilelang.compile(axpby, out_idx=[-1])
    assert k.target == Target("cuda-emu")
    x, y = (rng.standard_normal(64).astype(np.float32) for _ in range(2))
    np.testing.assert_allclose(k(x, y, 2.0), _ref(x, y, 2.0), rtol=1e-5, atol=1e-6)


def test_a_bad_tegula_target_is_an_error_naming_it():
    with config.override(default_target="tpu"):
        with pytest.raises(errors.ConfigError, match="TEGULA_TARGET='tpu' is not a target"):
            tilelang.compile(axpby, out_idx=[-1])
        k = tilelang.compile(axpby, out_idx=[-1], target="cpu")  # explicit targets still work
        assert k.target == Target("cpu")
