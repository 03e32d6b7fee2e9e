"""An exception raised inside a helper function the kernel calls is a KernelTypeError at the kernel
line that calls it, and the message lists the helper's own lines (outermost first), not tegula's."""
import inspect

import numpy as np
import pytest

import tegula
import tegula.language as T
from tegula.errors import KernelTypeError
from tegula_files import names_a_tegula_file


def _line(fn, text):
    src, start = inspect.getsourcelines(fn)
    return start + next(i for i, ln in enumerate(src) if text in ln)


def block_scale(n):
    if n > 4:
        raise ValueError(f"n={n} is more than this helper allows")
    return n * 2.0


def scale_twice(n):
    return block_scale(n) * block_scale(n - 1)


def kernel(n, helper):
    @T.prim_func
    def main(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(64):
                Y[i] = X[i] * helper(n)
    return main


def test_the_helpers_line_is_shown_with_the_kernel_line():
    with pytest.raises(KernelTypeError) as e:
        kernel(8, block_scale)
    msg = str(e.value)
    raise_line = _line(block_scale, "raise ValueError")
    assert msg.startswith("ValueError: n=8 is more than this helper allows\n")
    assert f"in block_scale, test_helper_traceback.py:{raise_line}: raise ValueError(" in msg
    assert f"test_helper_traceback.py:{_line(kernel, 'helper(n)')}" in msg   # the kernel line
    assert "Y[i] = X[i] * helper(n)" in msg and not names_a_tegula_file(msg)


def test_nested_helpers_are_listed_outermost_first():
    with pytest.raises(KernelTypeError) as e:
        kernel(6, scale_twice)
    msg = str(e.value)
    outer = f"in scale_twice, test_helper_traceback.py:{_line(scale_twice, 'return block_scale')}"
    inner = f"in block_scale, test_helper_traceback.py:{_line(block_scale, 'raise ValueError')}"
    assert outer in msg and inner in msg and msg.index(outer) < msg.index(inner)


@pytest.mark.parametrize("target", ["cpu", "cuda-emu"])
def test_a_helper_that_returns_builds_a_kernel_that_runs(target, rng):
    x = rng.standard_normal(64).astype(np.float32)
    y = tegula.compile(kernel(3, scale_twice), out_idx=[-1], target=target)(x)
    np.testing.assert_allclose(y, x.astype(np.float64) * 24.0, rtol=1e-6)


def test_an_error_raised_on_the_kernel_line_itself_lists_no_helper():
    def main_fn(X: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=32):
            for i in T.Parallel(64):
                X[i] = X[i] * int("x")

    with pytest.raises(KernelTypeError) as e:
        T.prim_func(main_fn)
    assert "ValueError: invalid literal" in str(e.value) and "\n  in " not in str(e.value)
