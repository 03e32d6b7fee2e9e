"""``tilelang.tools.Analyzer`` (roofline from the tile IR) and ``tilelang.carver`` (GPU
descriptions, GEMM tile hints)."""
import numpy as np
import pytest

import tegula
import tegula.language as T
from tegula import errors
from tegula.compat import carver, device, gpus
from tegula.tools import Analyzer


def gemm(M, N, K, bm=128, bn=128, bk=32, dtype="float16"):
    @T.prim_func
    def main(A: T.Tensor((M, K), dtype), B: T.Tensor((N, K), dtype), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), dtype)
            B_s = T.alloc_shared((bn, bk), dtype)
            C_l = T.alloc_fragment((bm, bn), "float32")
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[bx * bn, k * bk], B_s)
                T.gemm(A_s, B_s, C_l, transpose_B=True)
            T.copy(C_l, C[by * bm, bx * bn])

    return main


def elementwise(M, N):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, 64), T.ceildiv(M, 64), threads=128) as (bx, by):
            for i, j in T.Parallel(64, 64):
                B[by * 64 + i, bx * 64 + j] = A[by * 64 + i, bx * 64 + j] * 2.0

    return main


def test_gemm_roofline():
    M, N, K = 1024, 2048, 512
    r = Analyzer.analysis(gemm(M, N, K), "H200")
    assert r.total_flops == 2 * M * N * K
    blocks = (M // 128) * (N // 128)
    tiles = blocks * (K // 32) * (128 * 32 * 2) * 2  # A and B tiles of every k-step, fp16
    assert r.total_global_bytes == tiles + M * N * 4
    h200 = gpus.find("H200")
    assert r.expected_tflops == h200.peak_tflops("float16") and r.expected_bandwidth_GBps == h200.dram_GBps
    assert r.arithmetic_intensity == pytest.approx(r.total_flops / r.total_global_bytes)
    comp, mem = r.total_flops / (989.4e12), r.total_global_bytes / 4800e9
    assert r.compute_time == pytest.approx(comp) and r.memory_time == pytest.approx(mem)
    # the prediction counts tile reuse: below the no-reuse memory time, above the ideal compute time
    assert comp < r.estimated_time < mem and r.bound in ("compute", "L2", "memory")
    assert "H200" in str(r) and "FLOP/byte" in str(r)
    # a slower memory system moves the same bytes in more time
    assert Analyzer.analysis(gemm(M, N, K), "A100").memory_time > r.memory_time
    # a JITKernel and a mapping with "main" are analysed the same
    k = tegula.compile(gemm(256, 256, 64), out_idx=[-1], target="cpu")
    assert Analyzer.analysis(k, carver.CUDA("H100")).total_flops == 2 * 256 * 256 * 64
    assert Analyzer.analysis({"main": gemm(256, 256, 64)}, "H100").total_flops == 2 * 256 * 256 * 64


def test_memory_bound_elementwise_and_dynamic():
    big = Analyzer.analysis(elementwise(4096, 4096), "H100")
    assert big.bound == "memory" and big.compute_time is None   # every byte once: DRAM-bound
    assert big.estimated_time == pytest.approx(big.total_global_bytes / 3350e9) == pytest.approx(big.dram_time)
    r = Analyzer.analysis(elementwise(512, 256), "H100")
    assert r.total_flops == 0 and r.total_global_bytes == r.dram_bytes == 2 * 512 * 256 * 4
    assert r.blocks == 32 and r.bound == "L2"   # 32 blocks on 132 SMs: the tiles' own time wins
    f = elementwise(T.dynamic("m"), 256)
    with pytest.raises(errors.ArgumentError, match="depends on 'm'") as ei:
        Analyzer.analysis(f, "H100")
    assert "dynamic={'m': value}" in str(ei.value)
    assert Analyzer.analysis(f, "H100", dynamic={"m": 512}).total_global_bytes == r.total_global_bytes
    with pytest.raises(errors.ArgumentError, match="PrimFunc or a JITKernel"):
        Analyzer.analysis("not a kernel", "H100")


def test_cuda_descriptions(monkeypatch):
    h = carver.CUDA("H200")
    assert (h.sm_version, h.compute_capability, h.compute_max_core) == (90, "90", 132)
    assert h.smem_cap == 227 * 1024 and h.bandwidth[1] == 4800 * 1000 and not h.is_current
    assert carver.CUDA("sm_80").name == "A100" and carver.CUDA("cuda:sm_90a").name == "H100"
    assert carver.CUDA("cuda", device="NVIDIA H100 PCIe").compute_max_core == 114
    with pytest.raises(errors.ConfigError, match="known: A100"):
        carver.CUDA("cuda", device="Voodoo 3")
    with pytest.raises(errors.UnsupportedError):
        carver.CDNA("hip")
    # the GPU of this process: its name and SM count, the figures of its part
    monkeypatch.setattr(device, "compute_capability", lambda d=0: (9, 0))
    monkeypatch.setattr(device, "device_name", lambda d=0: "NVIDIA H200")
    monkeypatch.setattr(device, "multiprocessor_count", lambda d=0: 132)
    cur = carver.CUDA("cuda")
    assert cur.is_current and cur.name == "NVIDIA H200" and cur.dram_bandwidth_GBps == 4800
    assert carver.driver.get_num_sms() == 132
    monkeypatch.setattr(device, "compute_capability", lambda d=0: None)
    with pytest.raises(errors.ConfigError, match="no CUDA GPU in this process"):
        carver.CUDA("cuda")


def test_matmul_hints_fit_and_the_equivalent_function_runs(rng):
    arch = carver.CUDA("A100")
    t = carver.MatmulTemplate(M=256, N=256, K=128, in_dtype=T.float16, out_dtype=T.float16,
                              accum_dtype=T.float32).with_arch(arch)
    hints = t.recommend_hints(topk=6)
    assert 1 <= len(hints) <= 6 and hints == sorted(hints, key=lambda h: -h.score)
    for h in hints:
        bm, bn = h.block
        wm, wn = h.warp
        threads = (bm // wm) * (bn // wn) * 32
        assert (bm + bn) * h.rstep[0] * 2 * h.pipeline_stage <= arch.smem_cap
        assert bm * bn // threads <= 128
        assert isinstance(h.rasterization_plan, (carver.NoRasterization, carver.Rasterization2DRow))
        assert h.to_dict()["thread_num"] == threads
    f = t.equivalent_function()
    k = tegula.compile(f, out_idx=[-1], target="cpu")
    a = rng.standard_normal((256, 128)).astype(np.float16)
    b = rng.standard_normal((128, 256)).astype(np.float16)
    np.testing.assert_allclose(k(a, b).astype(np.float64), a.astype(np.float64) @ b.astype(np.float64),
                               rtol=2e-2, atol=5e-2)
    with pytest.raises(errors.ConfigError, match="with_arch"):
        carver.MatmulTemplate(64, 64, 64).recommend_hints()
