"""Developer-level kernels (alloc_shared / alloc_fragment, T.copy, T.gemm, T.Parallel, reductions)
compiled for the NPU with memories and cores inferred: the GPU examples' own sources."""
import importlib.util
import pathlib

import numpy as np
import pytest

import tegula
import tegula.language as T
from tegula.errors import ScopeError, UnsupportedError

EXAMPLES = pathlib.Path(__file__).resolve().parents[3] / "examples"
NPU = ["ascend-emu:a2a3", "ascend-emu:a5"]


def _example(name):
    spec = importlib.util.spec_from_file_location(f"gpu_{name}", EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("target", NPU)
@pytest.mark.parametrize("num_stages", [1, 2])
def test_gpu_gemm_example_on_the_npu(target, num_stages):
    rng = np.random.default_rng()
    ex = _example("gemm")
    f = ex.matmul.__wrapped__(96, 128, 64, block_M=64, block_N=64, block_K=32, num_stages=num_stages)
    a = rng.standard_normal((96, 64)).astype(np.float16)
    b = rng.standard_normal((64, 128)).astype(np.float16)
    c = tegula.compile(f, out_idx=[-1], target=target)(a, b)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c.astype(np.float64), ref, rtol=2e-3, atol=2e-2)


@pytest.mark.parametrize("target", NPU)
def test_a_gemm_with_block_swizzle_turned_off_runs_on_the_npu(target):
    """``T.use_swizzle(..., enable=False)`` (kept in the IR for the GPU's RasterBlocks) means
    nothing on the NPU's cores: the kernel runs race-free and matches float64."""
    M, N, K, bm, bn, bk = 96, 128, 64, 32, 64, 32

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            C_l = T.alloc_fragment((bm, bn), "float32")
            T.use_swizzle(panel_size=2, enable=False)
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * bm, bx * bn])

    rng = np.random.default_rng()
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    c = tegula.compile(main, out_idx=[-1], target=target)(a, b)
    np.testing.assert_allclose(c.astype(np.float64), a.astype(np.float64) @ b.astype(np.float64), rtol=2e-3, atol=2e-2)


@pytest.mark.parametrize("target", NPU)
def test_gpu_softmax_example_on_the_npu(target):
    rng = np.random.default_rng()
    ex = _example("softmax")
    k = tegula.compile(ex.softmax(64), out_idx=[-1], target=target)
    for rows in (20, 8):  # a dynamic row count, with a ragged last block
        x = (2 * rng.standard_normal((rows, 64))).astype(np.float16)
        np.testing.assert_allclose(k(x).astype(np.float64), ex.reference(x), rtol=0, atol=2e-3)


@pytest.mark.parametrize("target", NPU)
def test_gpu_rmsnorm_example_on_the_npu(target):
    rng = np.random.default_rng()
    ex = _example("rmsnorm")
    x = rng.standard_normal((12, 64)).astype(np.float16)
    w = (1 + 0.5 * rng.standard_normal(64)).astype(np.float16)
    y = tegula.compile(ex.rms_norm(12, 64), out_idx=[-1], target=target)(x, w)
    ref = ex.reference(x, w)
    assert (np.abs(y.astype(np.float64) - ref) <= 2.0 ** -10 * np.abs(ref) + 1e-5).all()


def test_memories_and_cores_are_inferred():
    from tegula.backends.npu.pipeline import lower
    from tegula.ir.npu import CoreScope, NpuKernel
    from tegula.ir.visitor import post_order_visit
    from tegula.target import Target

    f = _example("gemm").matmul.__wrapped__(128, 128, 64, block_M=64, block_N=64)
    low = lower(f, Target("ascend-emu", "a2a3"), {})
    ks, scopes = [], []
    post_order_visit(low.body, lambda n: ks.append(n) if isinstance(n, NpuKernel) else
                     scopes.append(n.kind) if isinstance(n, CoreScope) else None)
    assert {b.name: b.scope for b in ks[0].allocs} == {
        "A_shared": "l1", "B_shared": "l1", "C_local": "l0c", "A_shared_l0a": "l0a",
        "B_shared_l0b": "l0b"}
    assert set(scopes) == {"C"} and ks[0].grid == (4,)


def test_a_gemm_accumulator_used_by_the_vectors_is_a_located_error():
    def k(A: T.Tensor((64, 64), "float16"), C: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128) as bx:
            a_s = T.alloc_shared((64, 64), "float16")
            c_f = T.alloc_fragment((64, 64), "float32")
            T.copy(A, a_s)
            T.gemm(a_s, a_s, c_f, clear_accum=True)
            for i, j in T.Parallel(64, 64):  # vector use
                c_f[i, j] = T.max(c_f[i, j], 0)
            T.copy(c_f, C)
    f = T.prim_func(k)
    with pytest.raises(ScopeError) as e:
        tegula.compile(f, target="ascend-emu")
    assert "'c_f' is used as L0C by T.gemm" in str(e.value) and "as UB by a T.Parallel loop" in str(e.value)
    import inspect

    lines, first = inspect.getsourcelines(k)
    line = first + next(i for i, ln in enumerate(lines) if "# vector use" in ln)
    assert f"test_npu_tile_level.py:{line}" in str(e.value)


def test_parallel_loop_on_global_memory_is_unsupported_on_the_npu():
    @T.prim_func
    def k(A: T.Tensor((16, 16), "float32")):
        with T.Kernel(1, threads=32) as bx:
            for i, j in T.Parallel(16, 16):
                A[i, j] = A[i, j] * 2
    with pytest.raises(UnsupportedError, match="reads or writes global buffer 'A' directly"):
        tegula.compile(k, target="ascend-emu")


def test_tile_level_gemm_prints_as_pto_but_not_every_parallel_loop():
    f = _example("gemm").matmul.__wrapped__(128, 128, 64, block_M=64, block_N=64)
    src = tegula.compile(f, out_idx=[-1], target="ascend-pto:a2a3").get_kernel_source()
    assert "TMATMUL_ACC(C_local, C_local, A_shared_l0a, B_shared_l0b);" in src
    # x[i, j] = x[i, j] / row_sum[i] is one instruction; exp2((x - max) * LOG2E) is not
    with pytest.raises(UnsupportedError, match="one elementwise operation") as e:
        tegula.compile(_example("softmax").softmax(64), out_idx=[-1], target="ascend-pto:a2a3")
    assert "T.exp2" in open(e.value.span.file).read().splitlines()[e.value.span.line]
