"""T.reduce_bitand / reduce_bitor / reduce_bitxor and T.cummax on every target that runs here.

Each kernel runs on the interpreter, on the emulator (``cuda-emu``, whose result must also equal
the interpreter's bit for bit) and on a GPU where one is present, against a numpy reference in
int64 / float64; each also compiles for sm_80 and sm_90a.
"""
import os

import numpy as np
import pytest

import tegula
import tegula.language as T
from tegula import errors
from tegula.backends.cuda.compiler import available_backends

THIS = os.path.basename(__file__)


def _gpu() -> bool:
    try:
        import torch

        return torch.cuda.is_available()
    except ImportError:
        return False


@pytest.fixture(params=["cpu", "cuda-emu", "cuda-emu:sm_90a", pytest.param("cuda", marks=pytest.mark.gpu)])
def target(request):
    if request.param == "cuda" and not _gpu():
        pytest.skip("no CUDA GPU")
    return request.param


def _run(func, target, *args):
    """Run on ``target``; on the emulator, also check it equals the interpreter bit for bit."""
    got = tegula.compile(func, out_idx=[-1], target=target)(*args)
    if target.startswith("cuda-emu"):
        want = tegula.compile(func, out_idx=[-1], target="cpu")(*args)
        np.testing.assert_array_equal(got, want)
    return np.asarray(got.cpu() if hasattr(got, "cpu") else got)


def _compiles_for_cuda(func):
    if not available_backends():
        pytest.skip("no CUDA compiler (NVRTC or nvcc) here")
    for arch in ("sm_80", "sm_90a"):
        k = tegula.compile(func, out_idx=[-1], target=f"cuda:{arch}")
        assert "__global__" in k.get_kernel_source() and k.artifact.cubin


# -- bitwise reductions ----------------------------------------------------------------------

_NP = {"bitand": np.bitwise_and, "bitor": np.bitwise_or, "bitxor": np.bitwise_xor}
# how likely each bit of an input is set: AND and OR keep a mix of ones and zeros over 64 values
_P_ONE = {"bitand": 0.97, "bitor": 0.03, "bitxor": 0.5}


def _bits(rng, shape, dtype, p):
    """Random integers of ``dtype`` whose bits are each set with probability ``p``."""
    nbits = np.dtype(dtype).itemsize * 8
    on = rng.random(shape + (nbits,)) < p
    u = (on * (np.uint64(1) << np.arange(nbits, dtype=np.uint64))).sum(-1, dtype=np.uint64)
    return u.astype(f"uint{nbits}").view(dtype)


def bit_reduce_kernel(kind, R, C, dtype, dim, clear, scope):
    reduce = getattr(T, f"reduce_{kind}")
    out = R if dim == 1 else C

    @T.prim_func
    def main(X: T.Tensor((R, C), dtype), Init: T.Tensor((out,), dtype), Y: T.Tensor((out,), dtype)):
        with T.Kernel(1, threads=128) as _:
            if scope == "fragment":
                x = T.alloc_fragment((R, C), dtype)
            else:
                x = T.alloc_shared((R, C), dtype)
            y = T.alloc_fragment((out,), dtype)
            T.copy(X, x)
            T.copy(Init, y)
            reduce(x, y, dim=dim, clear=clear)
            T.copy(y, Y)

    return main


CASES = [("int32", 1, True, "fragment"), ("int32", 1, False, "fragment"), ("int8", 1, True, "fragment"),
         ("int32", 0, True, "fragment"), ("uint16", 0, False, "shared")]


@pytest.mark.parametrize("kind", ["bitand", "bitor", "bitxor"])
@pytest.mark.parametrize("dtype, dim, clear, scope", CASES)
def test_bitwise_reduction(target, rng, kind, dtype, dim, clear, scope):
    R, C = 16, 64
    func = bit_reduce_kernel(kind, R, C, dtype, dim, clear, scope)
    x = _bits(rng, (R, C), dtype, _P_ONE[kind])
    init = _bits(rng, (R if dim == 1 else C,), dtype, _P_ONE[kind])
    ref = _NP[kind].reduce(x.astype(np.int64), axis=dim)
    if not clear:
        ref = _NP[kind](ref, init.astype(np.int64))
    ref = ref.astype(dtype)
    assert len(np.unique(ref)) > 1  # the inputs give a result worth checking
    np.testing.assert_array_equal(_run(func, target, x, init), ref)


@pytest.mark.parametrize("kind", ["bitand", "bitor", "bitxor"])
def test_bitwise_reduction_compiles_for_cuda(kind):
    _compiles_for_cuda(bit_reduce_kernel(kind, 16, 64, "int32", 1, False, "fragment"))
    _compiles_for_cuda(bit_reduce_kernel(kind, 16, 64, "int8", 0, True, "shared"))


def test_bitwise_reduction_of_floats_is_an_error_at_the_line():
    with pytest.raises(errors.TegulaError) as ei:
        @T.prim_func
        def main(A: T.Tensor((16, 16), "float32")):
            with T.Kernel(1) as _:
                a = T.alloc_fragment((16, 16), "float32")
                m = T.alloc_fragment((16,), "float32")
                T.reduce_bitxor(a, m, dim=1)
    e = ei.value
    assert isinstance(e, errors.DTypeError)
    msg = str(e)
    assert "T.reduce_bitxor" in msg and "float32" in msg and "integer" in msg
    assert f"{THIS}:" in msg and "T.reduce_bitxor(a, m, dim=1)" in msg
    assert "semantic.py" not in msg and "primitives.py" not in msg


# -- cummax ---------------------------------------------------------------------------------

def cummax_kernel(R, C, dtype, dim, reverse, src_scope, dst):
    @T.prim_func
    def main(X: T.Tensor((R, C), dtype), Y: T.Tensor((R, C), dtype)):
        with T.Kernel(1, threads=128) as _:
            if src_scope == "fragment":
                x = T.alloc_fragment((R, C), dtype)
            else:
                x = T.alloc_shared((R, C), dtype)
            T.copy(X, x)
            if dst == "in place":
                T.cummax(x, dim=dim, reverse=reverse)
                T.copy(x, Y)
            else:
                y = T.alloc_fragment((R, C), dtype)
                T.cummax(x, y, dim=dim, reverse=reverse)
                T.copy(y, Y)

    return main


def _cummax_ref(x, dim, reverse):
    x = x.astype(np.float64) if x.dtype.kind == "f" else x.astype(np.int64)
    if reverse:
        return np.flip(np.maximum.accumulate(np.flip(x, dim), axis=dim), dim)
    return np.maximum.accumulate(x, axis=dim)


@pytest.mark.parametrize("dtype, dim, reverse, src_scope, dst", [
    ("float32", 1, False, "shared", "fragment"), ("float32", 0, True, "fragment", "fragment"),
    ("float16", 1, True, "fragment", "in place"), ("int32", 0, False, "shared", "in place")])
def test_cummax(target, rng, dtype, dim, reverse, src_scope, dst):
    R, C = 8, 32
    if dtype == "int32":
        x = rng.integers(-2**31, 2**31, (R, C)).astype(np.int32)
    else:
        x = rng.standard_normal((R, C)).astype(dtype)
    got = _run(cummax_kernel(R, C, dtype, dim, reverse, src_scope, dst), target, x)
    np.testing.assert_array_equal(got, _cummax_ref(x, dim, reverse).astype(dtype))


def test_cummax_compiles_for_cuda():
    _compiles_for_cuda(cummax_kernel(8, 32, "float32", 1, False, "shared", "fragment"))
    _compiles_for_cuda(cummax_kernel(8, 32, "float16", 0, True, "fragment", "in place"))


def test_cummax_prints_and_reads_back():
    func = cummax_kernel(8, 32, "float32", 1, True, "shared", "fragment")
    assert "T.cummax(" in func.script() and "reverse=True" in func.script()
