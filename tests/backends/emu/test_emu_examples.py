"""Every example kernel, lowered by the CUDA pipeline, runs on the emulator at small shapes and
matches the interpreter: bit for bit where the arithmetic is the same, within rounding where the
emulated mma sums in another order than the interpreter's gemm."""
import numpy as np
import pytest

import tegula
from emu_util import assert_match, ex, random_args, run_both

GEMM_TOL = 2e-3  # fp32 accumulation in another order, then one fp16 rounding
SUM_TOL = 2e-3   # a sum reduced as a shuffle tree vs numpy's order: one fp16 ulp at most

CASES = {
    "gemm_ragged": (lambda: ex("gemm").matmul.get_tir(200, 130, 70, 64, 64, 32), {}, GEMM_TOL),
    "gemm_bf16": (lambda: ex("gemm").matmul.get_tir(128, 128, 96, 64, 64, 32, 2, 128, dtype="bfloat16"), {},
                  2e-2),
    "flash_attention": (lambda: ex("flash_attention").flash_attention(1, 2, 100, 64), {}, GEMM_TOL),
    "flash_attention_causal_gqa": (lambda: ex("flash_attention").flash_attention(1, 4, 100, 64, True, 2), {},
                                   GEMM_TOL),
    "rmsnorm": (lambda: ex("rmsnorm").rms_norm(20, 512), {}, SUM_TOL),
    "softmax_dynamic_rows": (lambda: ex("softmax").softmax(256), {"M": 37}, SUM_TOL),
    "elementwise_add": (lambda: ex("elementwise_add").elementwise_add(100, 70), {}, 0),
    "gemm_int8": (lambda: ex("gemm_int8").matmul_int8(128, 128, 128), {}, 0),
    "splitk_gemm": (lambda: ex("splitk_gemm").splitk_matmul(128, 128, 256), {}, GEMM_TOL),
    "quantize": (lambda: ex("quantize").quantize_rows(64, 128), {}, 0),
    "linear_macro": (lambda: ex("linear_macro").linear(64, 64, 64), {}, GEMM_TOL),
}


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_example_matches_interpreter(name, arch, rng):
    """sm_80: mma.sync, ldmatrix, cp.async; sm_90a: TMA, mbarriers, wgmma, as the GPU runs them."""
    make, dims, tol = CASES[name]
    f = make()
    f = f.get_tir() if hasattr(f, "get_tir") else f
    ref, got = run_both(f, random_args(f, rng, dims), arch=arch)
    assert_match(ref, got, tol, tol)


HOPPER = {
    # TMA with a ragged last k-tile: the box past K reads zeros
    "gemm_tma_zero_fill": (lambda: ex("gemm").matmul.get_tir(128, 64, 72, 64, 64, 32), ("tl::tma_load", "tl::wgmma_ss")),
    # two consumer warpgroups, three stages refilled inside the loop
    "gemm_two_warpgroups": (lambda: ex("gemm").matmul.get_tir(256, 128, 192, 128, 64, 32, 3, 256),
                            ("tl::tma_load", "tl::wgmma_ss", "tl::mbarrier_wait")),
    # rows of 140 bytes: cp.async (generic proxy) feeds wgmma behind a proxy fence
    "gemm_cp_async_wgmma": (lambda: ex("gemm").matmul.get_tir(128, 64, 70, 64, 64, 32), ("tl::cp_async", "tl::wgmma_ss")),
    "flash_attention_tma": (lambda: ex("flash_attention").flash_attention(1, 2, 128, 64, num_stages=2),
                            ("tl::tma_load", "tl::wgmma_rs", "tl::wgmma_ss")),
}


def transposed_gemm(M, N, K, ta, tb):
    import tegula.language as T

    @T.prim_func
    def main(A: T.Tensor((K, M) if ta else (M, K), "float16"), B: T.Tensor((N, K) if tb else (K, N), "float16"),
             C: T.Tensor((M, N), "float32")):
        with T.Kernel(N // 64, M // 64, threads=128) as (bx, by):
            A_s = T.alloc_shared((32, 64) if ta else (64, 32), "float16")
            B_s = T.alloc_shared((64, 32) if tb else (32, 64), "float16")
            C_l = T.alloc_fragment((64, 64), "float32")
            T.clear(C_l)
            for k in T.Pipelined(K // 32, num_stages=2):
                if ta:
                    T.copy(A[k * 32, by * 64], A_s)
                else:
                    T.copy(A[by * 64, k * 32], A_s)
                if tb:
                    T.copy(B[bx * 64, k * 32], B_s)
                else:
                    T.copy(B[k * 32, bx * 64], B_s)
                T.gemm(A_s, B_s, C_l, transpose_A=ta, transpose_B=tb)
            T.copy(C_l, C[by * 64, bx * 64])
    return main


@pytest.mark.parametrize("ta,tb", [(True, False), (True, True), (False, True)])
def test_wgmma_descriptors_of_both_majors(ta, tb, rng):
    """MN-major and K-major operands: the descriptors' leading and stride byte offsets differ."""
    from tegula.backends.cuda.pipeline import lower
    from tegula.target import Target

    f = transposed_gemm(128, 64, 96, ta, tb)
    assert "tl::wgmma_ss(" in lower(f, Target("cuda", "sm_90a"), {}).script()
    ref, got = run_both(f, random_args(f, rng), arch="sm_90a")
    assert_match(ref, got, GEMM_TOL, GEMM_TOL)
OVERLAP = {"tegula.wgmma_overlap": True}


def test_wgmma_overlap_keeps_a_group_in_flight(rng):
    """wait_group 1 in the loop, loads S - 2 ahead, drained after it; without the drain the
    epilogue reads accumulators still in flight."""
    from tegula.backends.cuda.pipeline import lower
    from tegula.backends.emu import execute
    from tegula.errors import RaceError
    from tegula.target import Target
    from hopper_util import nth, without

    f = ex("gemm").matmul.get_tir(128, 128, 256, 128, 128, 32, 4, 128)
    low = lower(f, Target("cuda", "sm_90a"), OVERLAP)
    assert "tl::wgmma_wait_group(template=(1,)" in low.script()
    ref, got = run_both(f, random_args(f, rng), OVERLAP, arch="sm_90a")
    assert_match(ref, got, GEMM_TOL, GEMM_TOL)
    drain = nth(low, "tl::wgmma_wait_group", 1)
    with pytest.raises(RaceError, match=r"accumulator read before wgmma.wait_group: thread 0 reads register 'C_local'"):
        execute(without(low, drain), random_args(f, rng))


def test_fp8_wgmma(rng):
    import tegula.language as T

    M, N, K = 128, 64, 128

    @T.prim_func
    def fp8(A: T.Tensor((M, K), "float8_e4m3"), B: T.Tensor((N, K), "float8_e5m2"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, 2, threads=128) as (bx, by):
            A_s = T.alloc_shared((64, 64), "float8_e4m3")
            B_s = T.alloc_shared((64, 64), "float8_e5m2")
            C_l = T.alloc_fragment((64, 64), "float32")
            T.clear(C_l)
            for k in T.Pipelined(K // 64, num_stages=2):
                T.copy(A[by * 64, k * 64], A_s)
                T.copy(B[bx * 64, k * 64], B_s)
                T.gemm(A_s, B_s, C_l, transpose_B=True)
            T.copy(C_l, C[by * 64, bx * 64])

    from tegula.backends.cuda.pipeline import lower
    from tegula.target import Target

    assert "tl::wgmma_ss_fp8" in lower(fp8, Target("cuda", "sm_90a"), {}).script()
    ref, got = run_both(fp8, random_args(fp8, rng), arch="sm_90a")
    assert_match(ref, got, 1e-4, 1e-4)


@pytest.mark.parametrize("name", sorted(HOPPER))
def test_hopper_lowering_runs_as_lowered(name, rng):
    """The sm_90a lowering's own instructions run on the emulator (none is swapped for sm_80 ones)."""
    make, must = HOPPER[name]
    f = make()
    from tegula.backends.cuda.pipeline import lower
    from tegula.target import Target

    src = lower(f, Target("cuda", "sm_90a"), {}).script()
    for b in must:
        assert b in src, b
    ref, got = run_both(f, random_args(f, rng), arch="sm_90a")
    assert_match(ref, got, GEMM_TOL, GEMM_TOL)


@pytest.mark.parametrize("name, call", [
    ("elementwise_add", lambda m: m.main(37, 70, target="cuda-emu")),
    ("gemm_int8", lambda m: m.main(128, 64, 96, target="cuda-emu")),
    ("flash_attention", lambda m: m.main(1, 4, 80, 64, target="cuda-emu")),
    ("gemm_int8", lambda m: m.main(128, 64, 96, target="cuda-emu:sm_90a")),
    ("gemm", lambda m: m.main(128, 64, 96, target="cuda-emu:sm_90a")),
    ("flash_attention", lambda m: m.main(1, 2, 80, 64, target="cuda-emu:sm_90a")),
])
def test_example_main_checks_itself_on_the_emulator(name, call):
    """The examples' own float64 checks pass with target="cuda-emu"."""
    call(ex(name))


def test_target_string_and_source():
    k = tegula.compile(ex("elementwise_add").elementwise_add(64, 64), out_idx=[-1], target="cuda-emu:sm_80")
    assert str(k.target) == "cuda-emu:sm_80"
    src = k.get_kernel_source()
    assert "T.get_thread_binding()" in src and "tile_op" in src  # the thread-level IR
    a = np.ones((64, 64), np.float16)
    np.testing.assert_array_equal(k(a, a), np.full((64, 64), 2, np.float16))
