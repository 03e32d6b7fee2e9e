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


n_dyn = T.dynamic("n")


@T.prim_func
def mixed(X: T.Tensor((n_dyn, 8), "float16"), Y: T.Tensor((n_dyn, 8), "float16"), k: T.int8, s: T.float32,
          Z: T.Tensor((n_dyn, 8), "float32")):
    with T.Kernel(T.ceildiv(n_dyn, 4), threads=32) as bx:
        for i, j in T.Parallel(4, 8):
            if bx * 4 + i < n_dyn:
                Z[bx * 4 + i, j] = T.Cast("float32", X[bx * 4 + i, j] + Y[bx * 4 + i, j]) * s + k


def _h(shape, dtype=np.float16):
    return np.random.default_rng().standard_normal(shape).astype(dtype)


# (what is wrong, the call, the parameter the error must name)
BAD_CALLS = [
    ("too few arguments", lambda k: k(_h((8, 8)), _h((8, 8)), 1), "'s'"),
    ("too many arguments", lambda k: k(_h((8, 8)), _h((8, 8)), 1, 1.0, _h((8, 8))), "s"),
    ("no arguments", lambda k: k(), "'X'"),
    ("wrong dtype", lambda k: k(_h((8, 8), np.float32), _h((8, 8)), 1, 1.0), "'X'"),
    ("wrong dtype second", lambda k: k(_h((8, 8)), _h((8, 8), np.int32), 1, 1.0), "'Y'"),
    ("wrong rank", lambda k: k(_h((8,)), _h((8, 8)), 1, 1.0), "'X'"),
    ("rank 3", lambda k: k(_h((8, 8, 1)), _h((8, 8)), 1, 1.0), "'X'"),
    ("wrong static dim", lambda k: k(_h((8, 4)), _h((8, 4)), 1, 1.0), "'X'"),
    ("dynamic dims disagree", lambda k: k(_h((8, 8)), _h((6, 8)), 1, 1.0), "'Y'"),
    ("not contiguous", lambda k: k(_h((8, 16))[:, ::2], _h((8, 8)), 1, 1.0), "'X'"),
    ("a list for a tensor", lambda k: k([[0.0] * 8] * 8, _h((8, 8)), 1, 1.0), "'X'"),
    ("None for a tensor", lambda k: k(None, _h((8, 8)), 1, 1.0), "'X'"),
    ("a number for a tensor", lambda k: k(3.0, _h((8, 8)), 1, 1.0), "'X'"),
    ("a tensor for a scalar", lambda k: k(_h((8, 8)), _h((8, 8)), _h((8, 8)), 1.0), "'k'"),
    ("a float for an int scalar", lambda k: k(_h((8, 8)), _h((8, 8)), 1.5, 1.0), "'k'"),
    ("an int that does not fit", lambda k: k(_h((8, 8)), _h((8, 8)), 300, 1.0), "'k'"),
    ("a string for a scalar", lambda k: k(_h((8, 8)), _h((8, 8)), 1, "1.0"), "'s'"),
    ("None for a scalar", lambda k: k(_h((8, 8)), _h((8, 8)), 1, None), "'s'"),
    ("a bool for an int", lambda k: k(_h((8, 8)), _h((8, 8)), True, 1.0), "'k'"),
    ("an unsupported dtype", lambda k: k(np.zeros((8, 8), np.complex64), _h((8, 8)), 1, 1.0), "'X'"),
    ("an output by keyword", lambda k: k(_h((8, 8)), _h((8, 8)), 1, 1.0, Z=_h((8, 8))), "'Z'"),
    ("an unknown keyword", lambda k: k(_h((8, 8)), _h((8, 8)), 1, 1.0, W=1), "'W'"),
    ("a keyword given twice", lambda k: k(_h((8, 8)), _h((8, 8)), 1, 1.0, s=2.0), "'s'"),
    ("a keyword in the wrong case", lambda k: k(x=_h((8, 8)), Y=_h((8, 8)), k=1, s=1.0), "'x'"),
    ("a missing keyword", lambda k: k(X=_h((8, 8)), Y=_h((8, 8)), k=1), "'s'"),
    ("torch wrong dtype", lambda k: k(torch.zeros(8, 8), torch.zeros(8, 8, dtype=torch.float16), 1, 1.0), "'X'"),
    ("torch wrong shape", lambda k: k(torch.zeros(8, 8, dtype=torch.float16),
                                      torch.zeros(8, 9, dtype=torch.float16), 1, 1.0), "'Y'"),
    ("torch not contiguous", lambda k: k(torch.zeros(8, 8, dtype=torch.float16).t(),
                                         torch.zeros(8, 8, dtype=torch.float16), 1, 1.0), "'X'"),
    ("torch requires_grad wrong dtype", lambda k: k(torch.zeros(8, 8, requires_grad=True),
                                                    torch.zeros(8, 8, dtype=torch.float16), 1, 1.0), "'X'"),
    ("a 0-d tensor for a tensor", lambda k: k(np.float16(1.0), _h((8, 8)), 1, 1.0), "'X'"),
]


@pytest.mark.parametrize("what, call, name", BAD_CALLS, ids=[b[0] for b in BAD_CALLS])
def test_every_bad_call_names_the_parameter(what, call, name):
    k = tilelang.compile(mixed, out_idx=[-1], target="cpu")
    with pytest.raises(errors.ArgumentError) as ei:
        call(k)
    assert name in str(ei.value), f"{what}: {ei.value}"


def test_the_good_call_of_the_bad_call_table(rng):
    k = tilelang.compile(mixed, out_idx=[-1], target="cpu")
    x, y = _h((10, 8)), _h((10, 8))
    z = k(x, y, -3, 0.5)
    want = (x.astype(np.float64) + y.astype(np.float64)).astype(np.float16).astype(np.float64) * 0.5 - 3
    np.testing.assert_allclose(z, want, rtol=1e-3, atol=1e-3)
