"""Whole tiles stored to global memory by TMA on sm_90a (the TmaStores pass, ``lower_tma_store``):
compile-only here, the lowering on cuda-emu:sm_90a against float64, the GPU with ``-m gpu``."""
import sys
from pathlib import Path

import numpy as np
import pytest

import tegula
import tegula.language as T
from tegula.backends.cuda.compiler import available_backends
from tegula.backends.cuda.pipeline import lower
from tegula.backends.emu import execute
from tegula.errors import RaceError, SyncError
from tegula.ir.visitor import post_order_visit
from tegula.passconfig import PassConfigKey
from tegula.target import Target

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "emu"))
from cuda_gpu_util import sm90a_gpu  # noqa: E402
from test_wgmma import _ex  # noqa: E402

needs_compiler = pytest.mark.skipif(not available_backends(), reason="no CUDA compiler (NVRTC or nvcc) here")
SM90 = Target("cuda", "sm_90a")
ON = {PassConfigKey.TEGULA_TMA_STORE: True}
OFF = {PassConfigKey.TEGULA_TMA_STORE: False}
NO_WS = {PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True}


def _example(M, N, K, bm, bn, bk, stages, threads, dtype="float16"):
    """examples/gemm.py: the epilogue stores the accumulator from registers."""
    return _ex("gemm").matmul.get_tir(M, N, K, bm, bn, bk, stages, threads, dtype=dtype)


def _shared_epilogue(M, N, K, bm, bn, bk, stages, threads, dtype="float16", out_dtype=None):
    """The accumulator through a shared tile: ``T.copy(C_local, C_s); T.copy(C_s, C[...])``."""
    out_dtype = out_dtype or dtype

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            A_s = T.alloc_shared((bm, bk), dtype)
            B_s = T.alloc_shared((bk, bn), dtype)
            C_s = T.alloc_shared((bm, bn), out_dtype)
            C_l = T.alloc_fragment((bm, bn), "float32")
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C_s)
            T.copy(C_s, C[by * bm, bx * bn])
    return main


def _bias_relu(M, N, K, bm=128, bn=128, bk=32, stages=2, threads=128):
    """A fused epilogue: ``relu(A @ B + bias)`` written into the accumulator after the k-loop."""
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), bias: T.Tensor((N,), "float32"),
             C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            C_l = T.alloc_fragment((bm, bn), "float32")
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=stages):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_l)
            for i, j in T.Parallel(bm, bn):
                C_l[i, j] = T.max(C_l[i, j] + bias[bx * bn + j], 0)
            T.copy(C_l, C[by * bm, bx * bn])
    return main


def test_a_fused_epilogue_is_stored_by_tma_too(rng):
    M, N, K = 200, 136, 96
    f = _bias_relu(M, N, K)
    low = lower(f, SM90, {})
    assert _calls(low, "tl::tma_store")
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    bias = rng.standard_normal(N).astype(np.float32)
    c = np.full((M, N), np.nan, np.float16)
    execute(low, [a, b, bias, c])
    ref = np.maximum(a.astype(np.float64) @ b.astype(np.float64) + bias, 0)
    np.testing.assert_allclose(c.astype(np.float64), ref, rtol=4e-3, atol=4e-3 * np.abs(ref).max())


def _kernel(low):
    found = []
    post_order_visit(low.body, lambda n: found.append(n) if type(n).__name__ == "Kernel" else None)
    return found[0]


def _calls(low, name):
    found = []
    post_order_visit(low.body, lambda n: found.append(n) if getattr(n, "name", None) == name else None)
    return found


def test_a_shared_tile_is_stored_by_tma_by_default():
    low = lower(_shared_epilogue(512, 512, 256, 128, 256, 64, 3, 256), SM90, {})
    stores = _calls(low, "tl::tma_store")
    # C_s (128 x 256 fp16) in the copy engine's 128-byte swizzled blocks: one box of 64 columns each
    assert len(stores) == 4
    maps = {m.buffer.name: m for m in _kernel(low).annotations["tma_maps"]}
    assert maps["C"].box == (64, 128) and maps["C"].swizzle == 3
    offs = {b.name: o for b, o in _kernel(low).annotations["smem_offsets"].items()}
    assert offs["C_s"] % 1024 == 0
    text = low.script()
    # every writer fences, then the barrier, then one thread stores, commits and waits for the reads
    epilogue = text[text.index("T.tl::copy_vec(T.address_of(C_s["):]
    order = [epilogue.index(s) for s in ("T.tl::fence_proxy_async(", "T.tl::named_barrier_sync(1, 256",
                                         "T.tl::tma_store(C_tmap", "T.tl::tma_store_commit(",
                                         "T.tl::tma_store_wait(template=(0,)")]
    assert order == sorted(order)
    assert not _calls(lower(_shared_epilogue(512, 512, 256, 128, 256, 64, 3, 256), SM90, OFF), "tl::tma_store")


def test_a_gemm_accumulator_is_staged_for_tma_stores():
    f = _example(512, 512, 256, 128, 256, 64, 3, 256)
    assert not _calls(lower(f, SM90, OFF), "tl::tma_store")
    low = lower(f, SM90, {})
    assert len(_calls(low, "tl::tma_store")) == 4
    assert "C_local_tma" in {b.name for b in _kernel(low).annotations["smem_offsets"]}
    # attention's accumulator, rescaled by the softmax, is left to the registers unless forced
    fa = _ex("flash_attention").flash_attention(1, 2, 256, 64, num_stages=2)
    assert not _calls(lower(fa, SM90, {}), "tl::tma_store") and _calls(lower(fa, SM90, ON), "tl::tma_store")
    # TmaPipeline's kernels (one set of threads loads and computes) too; fp32 output: 32 columns a box
    low = lower(_shared_epilogue(256, 256, 128, 128, 128, 32, 2, 128, out_dtype="float32"), SM90, NO_WS)
    maps = {m.buffer.name: m for m in _kernel(low).annotations["tma_maps"]}
    assert maps["C"].box == (32, 128) and len(_calls(low, "tl::tma_store")) == 4


def test_no_tma_store_where_the_copy_engine_cannot_or_memory_is_short():
    # rows of 600 bytes: no tensor map
    assert not _calls(lower(_shared_epilogue(256, 300, 128, 128, 128, 32, 2, 128), SM90, ON), "tl::tma_store")
    # 4 stages of 128x256x64 take 192 KiB: a 64 KiB staging tile would not fit beside them
    low = lower(_example(512, 512, 512, 128, 256, 64, 4, 256), SM90, ON)
    assert not _calls(low, "tl::tma_store") and _kernel(low).annotations["smem_bytes"] <= 232448
    # tl.disable_tma_lower removes the pass
    assert not _calls(lower(_shared_epilogue(512, 512, 256, 128, 256, 64, 3, 256), SM90,
                            {PassConfigKey.TL_DISABLE_TMA_LOWER: True}), "tl::tma_store")


@needs_compiler
@pytest.mark.parametrize("make", [_example, _shared_epilogue])
def test_tma_stores_compile_for_sm90a(make):
    k = tegula.compile(make(1000, 776, 520, 128, 256, 64, 3, 256), out_idx=[-1], target="cuda:sm_90a",
                       pass_configs=ON)
    src = k.get_kernel_source()
    assert "tl::tma_store(C_tmap" in src and "tl::tma_store_wait<0>()" in src


# -- cuda-emu:sm_90a: the lowering as the GPU runs it, against float64 ----------------------------

EMU_CASES = {
    # warp-specialized (a producer warpgroup, two consumers), boxes past the bottom and right edges
    "ws_ragged": (lambda: _example(200, 264, 136, 128, 256, 64, 3, 256), ON),
    "ws_ragged_bf16": (lambda: _example(136, 200, 64, 128, 256, 64, 3, 256, "bfloat16"), ON),
    # TmaPipeline's loop, the shared epilogue of the default
    "tma_pipeline_shared": (lambda: _shared_epilogue(130, 96, 64, 64, 64, 32, 2, 128), NO_WS),
    "shared_fp32_out": (lambda: _shared_epilogue(72, 136, 32, 64, 128, 32, 2, 128, out_dtype="float32"), {}),
    # one consumer warpgroup, M = 64 tiles (WarpSpecialize's default for them)
    "ws_64_rows": (lambda: _example(100, 192, 128, 64, 128, 64, 2, 128), ON),
}


@pytest.mark.parametrize("name", sorted(EMU_CASES))
def test_tma_stores_on_the_emulator_match_float64(name, rng):
    make, configs = EMU_CASES[name]
    f = make()
    low = lower(f, SM90, configs)
    assert _calls(low, "tl::tma_store")
    A, B, C = f.params
    a = rng.standard_normal(A.shape).astype(A.dtype.np)
    b = rng.standard_normal(B.shape).astype(B.dtype.np)
    c = np.full(C.shape, np.nan, C.dtype.np)  # every element must be written
    execute(low, [a, b, c])
    ref = a.astype(np.float64) @ b.astype(np.float64)
    tol = 2e-2 if A.dtype.name == "bfloat16" else 4e-3
    np.testing.assert_allclose(c.astype(np.float64), ref, rtol=tol, atol=tol * np.abs(ref).max())


def test_the_emulator_reports_a_tma_store_never_waited_for(rng):
    from hopper_util import nth, without  # noqa: E402

    f = _example(128, 128, 64, 128, 128, 64, 2, 256)
    low = lower(f, SM90, ON)
    args = [rng.standard_normal(p.shape).astype(p.dtype.np) for p in f.params]
    with pytest.raises(RaceError, match=r"the block ends while a TMA store may still read shared buffer "
                                        r"'C_local_tma'.*\n.*gemm\.py:"):
        execute(without(low, nth(low, "tl::tma_store_wait")), [a.copy() for a in args])
    with pytest.raises(RaceError, match=r"the block ends while a TMA store may still read"):
        execute(without(low, nth(low, "tl::tma_store_commit")), [a.copy() for a in args])


def _rows_twice(M=128, N=64):
    """Two row blocks of X, doubled, through one shared tile S that a TMA store reads each time."""
    @T.prim_func
    def main(X: T.Tensor((M, N), "float16"), Y: T.Tensor((M, N), "float16")):
        with T.Kernel(1, threads=128) as bx:
            S = T.alloc_shared((64, N), "float16")
            F = T.alloc_fragment((64, N), "float32")
            for i in T.serial(M // 64):
                T.copy(X[i * 64, 0], F)
                for a, b in T.Parallel(64, N):
                    F[a, b] = F[a, b] * 2
                T.copy(F, S)
                T.copy(S, Y[i * 64, 0])
    return main


def test_a_tile_stored_in_a_loop_is_rewritten_only_after_the_store_read_it(rng):
    """Every synchronization statement of a loop that rewrites the tile a TMA store read in the
    iteration before is needed: removing any is reported at the kernel's line."""
    from hopper_util import sync_statements, without  # noqa: E402

    f = _rows_twice()
    low = lower(f, SM90, {})
    assert len(_calls(low, "tl::tma_store")) == 1
    x = rng.standard_normal((128, 64)).astype(np.float16)
    y = np.full((128, 64), np.nan, np.float16)
    execute(low, [x, y])
    np.testing.assert_array_equal(y, x * 2)
    reports = {}
    for i, s in enumerate(sync_statements(low)):
        with pytest.raises((RaceError, SyncError)) as e:
            execute(without(low, i), [x.copy(), np.zeros_like(y)])
        assert "test_tma_store.py:" in str(e.value)
        reports[s.value.name] = reports.get(s.value.name, set()) | {str(e.value).splitlines()[0].split(" on ")[0]}
    assert "tile rewritten while a TMA store still reads it" in reports["tl::tma_store_wait"]
    assert "generic-proxy write read by the async proxy without fence.proxy.async" in reports["tl::fence_proxy_async"]


# -- the GPU ------------------------------------------------------------------------------------

GPU_CASES = [  # (make, (M, N, K), (bm, bn, bk, stages, threads), dtype, configs)
    (_example, (1000, 776, 520), (128, 256, 64, 3, 256), "float16", ON),
    (_example, (4096, 4096, 512), (128, 256, 64, 3, 256), "bfloat16", ON),
    (_example, (64, 1032, 256), (64, 128, 64, 4, 128), "float16", ON),
    (_shared_epilogue, (1000, 776, 520), (128, 256, 64, 3, 256), "bfloat16", {}),
    (_shared_epilogue, (300, 264, 200), (128, 128, 32, 3, 128), "float16", NO_WS),
]


@pytest.mark.gpu
@pytest.mark.parametrize("case", GPU_CASES, ids=lambda c: f"{c[0].__name__}-{'x'.join(map(str, c[1]))}-{c[3]}")
def test_tma_stores_on_gpu(case, rng):
    torch = sm90a_gpu()
    make, (M, N, K), cfg, dtype, configs = case
    k = tegula.compile(make(M, N, K, *cfg, dtype=dtype), target="cuda", pass_configs=configs)
    assert "tl::tma_store(" in k.get_kernel_source()
    tdt = getattr(torch, dtype)
    a = torch.tensor(rng.standard_normal((M, K)), dtype=tdt, device="cuda")
    b = torch.tensor(rng.standard_normal((K, N)), dtype=tdt, device="cuda")
    # C is the first M rows of a larger buffer: the boxes past row M must not write the rest
    buf = torch.full((M + 128, N), float("nan"), dtype=tdt, device="cuda")
    c = buf[:M]
    k(a, b, c)
    torch.cuda.synchronize()
    ref = a.double().cpu().numpy() @ b.double().cpu().numpy()
    out = c.double().cpu().numpy()
    assert np.isfinite(out).all()
    assert torch.isnan(buf[M:]).all()
    err = np.linalg.norm(out - ref) / np.linalg.norm(ref)
    assert err < (1e-2 if dtype == "bfloat16" else 2e-3), err
