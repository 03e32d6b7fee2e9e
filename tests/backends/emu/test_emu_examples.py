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
