"""Block-level code (outside T.Parallel and tile operations) runs in every thread of the block, as
in TileLang: an element atomic there is made by every thread, each with its own value, and a store
whose index or value differs between threads is made by each thread. The same on every target."""
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

import tegula
import tegula.language as T
from tegula.backends.cuda.compiler import available_backends
from tegula.errors import SemanticsWarning

EMU = ["cpu", "cuda-emu", "cuda-emu:sm_90a"]
B = 4


def per_thread_registers():
    @T.prim_func
    def k(X: T.Tensor((B, 32), "float32"), Y: T.Tensor((B,), "float32"),
          Z: T.Tensor((B, 32), "float32")):
        with T.Kernel(B, threads=32) as bx:
            tx = T.get_thread_binding()
            acc = T.alloc_local((1,), "float32")
            j = T.alloc_var("int32")
            acc[0] = X[bx, tx] * 2.0
            j = tx
            T.atomic_add(Y[bx], acc[0])    # each thread adds its own acc[0]
            Z[bx, j] = acc[0]              # each thread stores at its own j

    return k


@pytest.mark.parametrize("target", EMU)
def test_atomic_and_store_of_per_thread_registers_are_made_by_every_thread(target, rng):
    x = rng.standard_normal((B, 32)).astype(np.float32)
    y, z = np.zeros(B, np.float32), np.full((B, 32), np.nan, np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SemanticsWarning)  # nothing ambiguous here
        tegula.compile(per_thread_registers(), target=target)(x, y, z)
    x64 = 2 * x.astype(np.float64)
    np.testing.assert_allclose(y, x64.sum(1), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(z, (2 * x).astype(np.float32))


@pytest.mark.skipif(not available_backends(), reason="no CUDA compiler (NVRTC or nvcc) here")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_cuda_source_makes_the_per_thread_atomic_in_every_thread(arch):
    src = tegula.compile(per_thread_registers(), target=f"cuda:{arch}").get_kernel_source()
    lines = [ln.strip() for ln in src.splitlines()]
    at = next(i for i, ln in enumerate(lines) if ln.startswith("tl::atomic_add(&Y["))
    assert "if" not in lines[at - 1], src  # no guard: not thread 0 alone
    st = next(i for i, ln in enumerate(lines) if ln.startswith("Z["))
    assert "if" not in lines[st - 1], src


def uniform_add(threads: int):
    @T.prim_func
    def k(X: T.Tensor((B,), "float32"), Y: T.Tensor((B,), "float32")):
        with T.Kernel(B, threads=threads) as bx:
            v = T.alloc_var("float32")
            v = X[bx] + 1.0
            T.atomic_add(Y[bx], v * 1.0)

    return k


LINE_OF_ADD = uniform_add.__code__.co_firstlineno + 6


@pytest.mark.parametrize("target", EMU)
def test_uniform_block_level_add_is_made_once_per_thread_with_a_located_warning(target, rng):
    x = rng.standard_normal(B).astype(np.float32)
    y = np.zeros(B, np.float32)
    with pytest.warns(SemanticsWarning) as rec:
        k = tegula.compile(uniform_add(64), target=target)
    msg = str(rec[0].message)
    assert "adds the same value 64 times" in msg and "T.atomic_add(Y[bx], v * 1.0)" in msg
    assert "test_block_level_threads.py" in msg and "if T.get_thread_binding() == 0" in msg
    assert rec[0].filename == __file__ and rec[0].lineno == LINE_OF_ADD  # the warning's own place
    k(x, y)
    np.testing.assert_allclose(y, 64 * (x.astype(np.float64) + 1), rtol=1e-5)


@pytest.mark.parametrize("target", EMU)
def test_add_under_thread_zero_is_made_once_without_warning(target, rng):
    @T.prim_func
    def k(X: T.Tensor((B,), "float32"), Y: T.Tensor((B,), "float32")):
        with T.Kernel(B, threads=64) as bx:
            tx = T.get_thread_binding()
            if tx == 0:
                T.atomic_add(Y[bx], X[bx])

    x = rng.standard_normal(B).astype(np.float32)
    y = np.zeros(B, np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SemanticsWarning)
        tegula.compile(k, target=target)(x, y)
    np.testing.assert_allclose(y, x, rtol=1e-6)


def test_one_thread_blocks_do_not_warn(rng):
    x = rng.standard_normal(B).astype(np.float32)
    y = np.zeros(B, np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SemanticsWarning)
        tegula.compile(uniform_add(1), target="cpu")(x, y)
    np.testing.assert_allclose(y, x.astype(np.float64) + 1, rtol=1e-6)


def test_a_region_adds_once_per_thread_of_its_own_and_a_parallel_add_once():
    """In a ``T.ws`` region the add is made by the region's threads; inside ``T.Parallel`` once."""
    from tegula.transform.thread_variance import warn_uniform_adds

    @T.prim_func
    def k(X: T.Tensor((B,), "float32"), Y: T.Tensor((B,), "float32")):
        with T.Kernel(B, threads=256) as bx:
            with T.ws(1):
                T.atomic_add(Y[bx], X[bx])
            for i in T.Parallel(1):
                T.atomic_add(Y[bx + i], X[bx])
            T.atomic_add(Y[bx], 2.0 * X[bx])

    with pytest.warns(SemanticsWarning) as rec:
        warn_uniform_adds(k)
    got = sorted((r.lineno, int(re.search(r"adds the same value (\d+) times", str(r.message)).group(1))) for r in rec)
    lines = Path(__file__).read_text().splitlines()
    at = [i + 1 for i, t in enumerate(lines) if t.strip() in ("T.atomic_add(Y[bx], X[bx])", "T.atomic_add(Y[bx], 2.0 * X[bx])")]
    assert got == [(at[-2], 128), (at[-1], 256)]
