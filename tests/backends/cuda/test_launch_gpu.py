"""Launching hand-built kernels (from test_codegen.py) on a GPU and checking them against numpy.

Marked ``gpu``: run with ``python -m pytest -m gpu tests/backends/cuda/test_launch_gpu.py``.
Outputs are poisoned (NaN / -1) before each run; inputs are fresh random numbers.
"""
from __future__ import annotations

import time

import numpy as np
import pytest

from test_codegen import row_sums, row_sums_reference, swizzle_count, two_kernels, vector_add

import tegula
from tegula.transform import Pipeline
from tegula.backends.cuda.jit import build_lowered
from tegula.backends.cuda.launcher import CudaError
from tegula.ir import expr as E
from tegula.ir import stmt as S
from tegula.ir.buffer import Buffer
from tegula.ir.expr import Builtin, Var
from tegula.target import gpu_available

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def arch() -> str:
    from tegula.backends.cuda.compiler import detect_arch

    if not gpu_available():
        pytest.skip("no GPU")
    a = detect_arch()
    assert a is not None
    return a


def test_vector_add(arch, rng):
    n = 1000
    art = build_lowered(vector_add(n), arch)
    a = torch.tensor(rng.standard_normal(n), dtype=torch.float32, device="cuda")
    b = torch.tensor(rng.standard_normal(n), dtype=torch.float32, device="cuda")
    c = torch.full((n,), float("nan"), device="cuda")
    art.run([a, b, c])
    torch.cuda.synchronize()
    np.testing.assert_allclose(c.cpu().numpy(), a.cpu().numpy() + b.cpu().numpy(), rtol=1e-6)


@pytest.mark.parametrize("m", [1, 37, 64])
def test_row_sums_dynamic_rows_swizzle_smem_while(arch, rng, m):
    art = build_lowered(row_sums(), arch)
    x = rng.standard_normal((m, 64)).astype(np.float32)
    scale = float(rng.uniform(0.5, 2.0))
    X = torch.tensor(x, device="cuda")
    Out = torch.full((m, 64), float("nan"), device="cuda")
    art.run([X, Out, scale])
    torch.cuda.synchronize()
    np.testing.assert_allclose(Out.cpu().numpy(), row_sums_reference(x, scale), rtol=1e-4, atol=1e-4)


def test_two_kernels_in_order_half(arch, rng):
    n = 256
    art = build_lowered(two_kernels(n), arch)
    x = rng.standard_normal(n).astype(np.float16)
    X = torch.tensor(x, device="cuda")
    Y = torch.full((n,), float("nan"), dtype=torch.float16, device="cuda")
    art.run([X, Y])
    torch.cuda.synchronize()
    want = (x.astype(np.float32) * 2).astype(np.float16).astype(np.float32) + 1
    np.testing.assert_allclose(Y.cpu().float().numpy(), want.astype(np.float16).astype(np.float32), rtol=1e-3)


@pytest.mark.parametrize("gx,gy,panel,order", [(7, 5, 2, "row"), (8, 3, 4, "row"), (5, 9, 4, "col"),
                                               (3, 3, 8, "row"), (33, 17, 4, "col")])
def test_swizzle_visits_every_block_once(arch, gx, gy, panel, order):
    art = build_lowered(swizzle_count(gx, gy, panel, order), arch)
    count = torch.zeros((gy, gx), dtype=torch.int32, device="cuda")
    art.run([count])
    torch.cuda.synchronize()
    assert (count.cpu().numpy() == 1).all()


def reverse_smem(n: int = 16384, threads: int = 256) -> S.PrimFunc:
    """Y = X reversed, staged through n * 4 bytes of shared memory (64 KB by default)."""
    X = Buffer("X", (n,), "float32")
    Y = Buffer("Y", (n,), "float32")
    Sm = Buffer("Sm", (n,), "float32", scope="shared.dyn")
    t, q, b = Var("t"), Var("q"), Var("b")
    body = S.seq(
        S.For(q, E.const(0), n // threads, S.BufferStore(Sm, (t + q * threads,), X[t + q * threads])),
        S.Evaluate(Builtin("sync_threads")),
        S.For(q, E.const(0), n // threads, S.BufferStore(Y, (t + q * threads,), Sm[n - 1 - (t + q * threads)])),
    )
    k = S.Kernel(grid=(1,), threads=(threads,), block_vars=(b,), allocs=(Sm,), body=body, thread_var=t)
    return S.PrimFunc("reverse", (X, Y), k)


def test_large_dynamic_shared_memory(arch, rng):
    """64 KB of shared memory: needs cuFuncSetAttribute above 48 KB."""
    n = 16384
    art = build_lowered(reverse_smem(n), arch)
    assert art.metadata["kernels"][0]["dynamic_smem_bytes"] == n * 4
    x = torch.tensor(rng.standard_normal(n), dtype=torch.float32, device="cuda")
    y = torch.full((n,), float("nan"), device="cuda")
    art.run([x, y])
    torch.cuda.synchronize()
    np.testing.assert_array_equal(y.cpu().numpy(), x.cpu().numpy()[::-1])


def test_cuda_array_interface(arch, rng):
    cupy = pytest.importorskip("cupy")
    n = 1000
    art = build_lowered(vector_add(n), arch)
    a = cupy.asarray(rng.standard_normal(n).astype(np.float32))
    b = cupy.asarray(rng.standard_normal(n).astype(np.float32))
    c = cupy.full((n,), np.nan, dtype=np.float32)
    art.run([a, b, c])
    cupy.cuda.get_current_stream().synchronize()
    np.testing.assert_allclose(cupy.asnumpy(c), cupy.asnumpy(a) + cupy.asnumpy(b), rtol=1e-6)


def test_runs_on_torch_current_stream(arch, rng):
    """The kernel reads an input written on a busy side stream: it only sees it if queued behind."""
    n = 1000
    art = build_lowered(vector_add(n), arch)
    s = torch.cuda.Stream()
    a_host = rng.standard_normal(n).astype(np.float32)
    a_src = torch.tensor(a_host, device="cuda")
    a = torch.zeros(n, device="cuda")
    b = torch.tensor(rng.standard_normal(n), dtype=torch.float32, device="cuda")
    c = torch.full((n,), float("nan"), device="cuda")
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        torch.cuda._sleep(50_000_000)
        a.copy_(a_src)
        art.run([a, b, c])
    s.synchronize()
    np.testing.assert_allclose(c.cpu().numpy(), a_host + b.cpu().numpy(), rtol=1e-6)


def test_jit_kernel_end_to_end(arch, rng):
    """tegula.compile(target='cuda') with the pipeline replaced by the identity on thread-level IR."""
    func = vector_add(1000)
    kernel = tegula.compile(func, out_idx=[2], target="cuda", pipeline=Pipeline())
    assert "vector_add_kernel" in kernel.get_kernel_source()
    a = torch.tensor(rng.standard_normal(1000), dtype=torch.float32, device="cuda")
    b = torch.tensor(rng.standard_normal(1000), dtype=torch.float32, device="cuda")
    c = kernel(a, b)
    torch.cuda.synchronize()
    np.testing.assert_allclose(c.cpu().numpy(), a.cpu().numpy() + b.cpu().numpy(), rtol=1e-6)


def test_launch_overhead(arch):
    n = 1000
    art = build_lowered(vector_add(n), arch)
    a, b, c = (torch.zeros(n, device="cuda") for _ in range(3))
    values = [a, b, c]
    for _ in range(100):
        art.run(values)
    torch.cuda.synchronize()
    reps = 5000
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(reps):
            art.run(values)
        best = min(best, (time.perf_counter() - t0) / reps)
        torch.cuda.synchronize()
    print(f"\nlaunch overhead: {best * 1e6:.2f} us per call of CudaArtifact.run")
    assert best < 50e-6


def test_wrong_device_tensor_is_an_error(arch):
    art = build_lowered(vector_add(8), arch)
    with pytest.raises(tegula.errors.ArgumentError):
        art.run([torch.zeros(8), torch.zeros(8), torch.zeros(8)])


def test_cuda_error_class_is_a_tegula_error():
    assert issubclass(CudaError, tegula.errors.TegulaError)
