"""Compile options given by keyword to ``f.compile(...)`` / ``f.get_kernel_source(...)``: they
build for that target with those pass configs; a keyword that is no parameter, ``T.const``
symbol or option is an ArgumentError naming it and the names there are."""
import numpy as np
import pytest

import tegula
import tegula.language as T
from tegula.errors import ArgumentError


@tegula.jit(target="cpu")
def scale(A, block=32, factor=2.0):
    M = T.const("M")
    A: T.Tensor((M,), "float32")
    B = T.empty((M,), "float32")
    with T.Kernel(T.ceildiv(M, block), threads=32) as bx:
        t = T.alloc_fragment((block,), "float32")
        T.copy(A[bx * block], t)
        for i in T.Parallel(block):
            t[i] = t[i] * factor
        T.copy(t, B[bx * block])
    return B


@tegula.jit(out_idx=[-1], target="cpu")
def lazy_scale(M, block=32):
    @T.prim_func
    def main(A: T.Tensor((M,), "float32"), B: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, block), threads=32) as bx:
            for i in T.Parallel(block):
                B[bx * block + i] = A[bx * block + i] * 3.0
    return main


@pytest.mark.parametrize("target", ["cpu", "cuda-emu"])
def test_eager_compile_target_builds_for_that_target(target, rng):
    k = scale.compile(M=96, factor=1.5, target=target)
    assert str(k.target) == target
    a = rng.standard_normal(96).astype(np.float32)
    np.testing.assert_allclose(k(a), a.astype(np.float64) * 1.5, rtol=1e-6)
    assert scale.compile(M=96, factor=1.5).target.kind == "cpu"  # the decorator's otherwise


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_eager_compile_target_compile_only_cuda(arch):
    k = scale.compile(M=256, target=f"cuda:{arch}")
    assert str(k.target) == f"cuda:{arch}"
    src = k.get_kernel_source()
    assert "__global__" in src and f"for cuda:{arch}" in src
    # get_kernel_source takes the options as compile does, with and without tensors
    assert f"for cuda:{arch}" in scale.get_kernel_source(M=256, target=f"cuda:{arch}")
    a = np.zeros(256, np.float32)
    assert f"for cuda:{arch}" in scale.get_kernel_source(a, target=f"cuda:{arch}")


def test_pass_configs_and_compile_flags_are_honoured():
    k = scale.compile(M=64, target="cuda:sm_80", pass_configs={"tl.disable_fast_math": True},
                      compile_flags=["-DTEGULA_TEST_FLAG=1"])
    assert k.pass_configs["tl.disable_fast_math"] is True
    assert k.pass_configs["tl.device_compile_flags"] == ["-DTEGULA_TEST_FLAG=1"]
    with pytest.raises(Exception, match="tl.no_such_key"):
        scale.compile(M=64, pass_configs={"tl.no_such_key": 1})
    # options accepted for TileLang's sake change nothing
    k2 = scale.compile(M=64, execution_backend="cython", verbose=True, target_host="llvm")
    assert k2.target.kind == "cpu"


def test_lazy_compile_takes_the_options_too(rng):
    k = lazy_scale.compile(M=64, target="cuda-emu")
    assert str(k.target) == "cuda-emu"
    a = rng.standard_normal(64).astype(np.float32)
    np.testing.assert_allclose(k(a), a.astype(np.float64) * 3.0, rtol=1e-6)
    assert "for cuda:sm_80" in lazy_scale.get_kernel_source(64, target="cuda:sm_80")


def test_unknown_keyword_names_itself_and_the_known_names():
    with pytest.raises(ArgumentError) as e:
        scale.compile(M=64, targt="cuda:sm_80")
    msg = str(e.value)
    assert "'targt'" in msg and "did you mean 'target'" in msg
    assert "parameters: A, block, factor" in msg and "T.const symbols: M" in msg
    assert "compile options: target, pass_configs" in msg
    with pytest.raises(ArgumentError, match="keyword 'N' is not a parameter"):
        scale.get_tir(M=64, N=3)


@pytest.mark.parametrize("call,where", [(lambda a: scale.get_kernel_source(a, Q=3), "get_kernel_source()"),
                                        (lambda a: scale(a, Q=3), "__call__()")])
def test_an_unknown_keyword_with_tensors_names_the_method_called(call, where):
    with pytest.raises(ArgumentError) as e:
        call(np.zeros(64, np.float32))
    assert str(e.value).startswith(f"scale.{where}: keyword 'Q' is not a parameter of scale")


def test_out_idx_is_for_lazy_kernels():
    with pytest.raises(ArgumentError, match="out_idx is for lazy-style kernels"):
        scale.compile(M=64, out_idx=[-1])


def test_a_parameter_named_like_an_option_stays_the_parameter(rng):
    @tegula.jit(target="cpu")
    def shift(A, target=1.0):
        M = T.const("M")
        A: T.Tensor((M,), "float32")
        B = T.empty((M,), "float32")
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(M):
                B[i] = A[i] + target
        return B

    k = shift.compile(M=32, target=4.0)
    assert k.target.kind == "cpu"
    a = rng.standard_normal(32).astype(np.float32)
    np.testing.assert_allclose(k(a), a.astype(np.float64) + 4.0, rtol=1e-6)


def test_compile_flags_and_the_pass_config_are_split_by_one_rule():
    """``compile_flags=`` (jit) and ``tl.device_compile_flags`` (the CUDA options) go through
    passconfig.split_flags: a string splits at whitespace, a list is kept, anything else is a
    ConfigError naming which of the two it was."""
    from tegula.backends.cuda.jit import _options
    from tegula.errors import ConfigError
    from tegula.jit import _with_flags

    cfg = _with_flags({"tl.device_compile_flags": "-O3  -DA=1"}, ["-DB=2"])
    assert cfg["tl.device_compile_flags"] == ["-O3", "-DA=1", "-DB=2"]
    assert _options(cfg)[0] == ["-lineinfo", "-O3", "-DA=1", "-DB=2"]
    assert _options({"tl.device_compile_flags": "-O3 -DA=1"})[0] == ["-lineinfo", "-O3", "-DA=1"]
    bad = {"tl.device_compile_flags": 5}
    with pytest.raises(ConfigError, match="tl.device_compile_flags must be a string"):
        _with_flags(bad, "-O3")
    with pytest.raises(ConfigError, match="tl.device_compile_flags must be a string"):
        _options(bad)
    with pytest.raises(ConfigError, match="compile_flags must be a string"):
        _with_flags(None, 5)


@pytest.mark.parametrize("target", ["cpu", "cuda-emu"])
def test_eager_get_tir_with_tensors_specializes_on_their_shapes(target, rng):
    a = rng.standard_normal(160).astype(np.float32)
    prim = scale.get_tir(a, factor=0.5)   # tensors given: their shapes and dtypes, no T.const values
    assert "160" in prim.script() and "float32" in prim.script()
    k = tegula.compile(prim, out_idx=[-1], target=target)
    np.testing.assert_allclose(k(a), a.astype(np.float64) * 0.5, rtol=1e-6)
