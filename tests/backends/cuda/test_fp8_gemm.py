"""FP8 GEMM (examples/gemm_fp8.py): TileLang's periodic promotion (2xAcc) and the epilogues fused
after it (row / column scales, bias, activation, cast), on the interpreter, on cuda-emu:sm_90a
against float64 with fresh fp8 inputs (e4m3 and e5m2), compiled for sm_90a, and on the GPU."""
import sys
from pathlib import Path

import numpy as np
import pytest

import tegula
from tegula.backends.cuda.pipeline import lower
from tegula.ir.stmt import Kernel
from tegula.ir.visitor import post_order_visit
from tegula.passconfig import PassConfigKey
from tegula.target import Target

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cuda_gpu_util import sm90a_gpu  # noqa: E402
from test_wgmma import _ex, needs_compiler  # noqa: E402

SM90 = Target("cuda", "sm_90a")
SMALL = (64, 128, 64, 2, 128)  # one consumer warpgroup
WIDE = (128, 128, 64, 2, 256)  # two, the promotion split off by WarpSpecialize


def _build(M, N, K, tile, target, **kw):
    ex = _ex("gemm_fp8")
    return tegula.compile(ex.matmul_fp8.__wrapped__(M, N, K, *tile, **kw), out_idx=[-1], target=target)


def _run(M, N, K, tile, target, rng, in_dtype="float8_e4m3", **kw):
    """Relative error against float64 of one fused FP8 GEMM on ``target`` (fresh inputs from ``rng``)."""
    ex = _ex("gemm_fp8")
    seed = int(rng.integers(1 << 30))
    rows, cols, bias = kw.get("scale_rows", False), kw.get("scale_cols", False), kw.get("bias", False)
    a, b, vec = ex.random_inputs(M, N, K, in_dtype, seed, rows, cols, bias)
    k = _build(M, N, K, tile, target, in_dtype=in_dtype, out_dtype=kw.pop("out_dtype", "float32"), **kw)
    args = [v for v in (vec.get("sa"), vec.get("sb"), vec.get("bias")) if v is not None]
    c = np.asarray(k(a, b, *args), dtype=np.float64)
    ref = ex.reference(a, b, vec.get("sa"), vec.get("sb"), vec.get("bias"), kw.get("activation"))
    assert np.isfinite(c).all()
    return float(np.linalg.norm(c - ref) / np.linalg.norm(ref))


@pytest.mark.parametrize("target", ["cpu", "cuda-emu:sm_90a"])
@pytest.mark.parametrize("in_dtype", ["float8_e4m3", "float8_e5m2"])
@pytest.mark.parametrize("promote, K", [(0, 192), (1, 192), (2, 320)])  # 320 = 5 k-tiles: a tail after the last
def test_promotion_matches_float64(target, in_dtype, promote, K, rng):
    assert _run(64, 128, K, SMALL, target, rng, in_dtype, promote=promote) < 1e-6


@pytest.mark.parametrize("activation", [None, "relu", "silu", "gelu"])
def test_fused_epilogues_match_float64_on_the_emulator(activation, rng):
    err = _run(128, 256, 128, WIDE, "cuda-emu:sm_90a", rng, promote=1, scale_rows=True, scale_cols=True,
               bias=True, activation=activation)
    assert err < 1e-6


def test_epilogue_with_one_vector_and_a_bf16_cast(rng):
    # bfloat16 output: the cast is the last step, its rounding (2^-9) the error
    assert _run(64, 128, 128, SMALL, "cuda-emu:sm_90a", rng, scale_cols=True, out_dtype="bfloat16") < 4e-3
    assert _run(100, 200, 130, SMALL, "cuda-emu:sm_90a", rng, bias=True, activation="relu") < 1e-6


def test_unknown_activation_is_refused():
    with pytest.raises(ValueError, match="activation must be one of"):
        _build(64, 64, 64, SMALL, "cpu", activation="tanh")


def _has_compiler() -> bool:
    from tegula.backends.cuda.compiler import available_backends

    return bool(available_backends())


def _lowered(M, N, K, tile, **kw):
    ex = _ex("gemm_fp8")
    ks: list = []
    post_order_visit(lower(ex.matmul_fp8.__wrapped__(M, N, K, *tile, **kw), SM90, {}),
                     lambda n: ks.append(n) if isinstance(n, Kernel) else None)
    return ks[0]


def test_epilogue_runs_in_registers():
    """Scales, bias and activation read the accumulator where wgmma left it: no shared buffer
    beyond the operand stages and the barriers, no staging, wgmma kept in flight."""
    k = _lowered(1024, 1024, 1024, (128, 256, 128, 4, 256), scale_rows=True, scale_cols=True, bias=True,
                 activation="silu")
    shared = sorted(b.name for b in k.allocs if b.is_shared)
    assert shared == ["A_shared", "B_shared", "k_bars"], shared
    assert "warp_specialized" in k.annotations
    src = _build(1024, 1024, 1024, (128, 256, 128, 4, 256), "cuda:sm_90a", scale_rows=True, scale_cols=True,
                 bias=True, activation="silu").get_kernel_source() if _has_compiler() else ""
    if src:  # the loop keeps one k-tile of wgmma in flight; the epilogue reads no shared memory
        assert "wgmma_wait_group<1>" in src
        epilogue = src[src.index("v = acc[i, j]"):]
        assert "tl_smem" not in epilogue and "sync_threads" not in epilogue


def test_promoting_loop_is_warp_specialized_at_256_threads():
    assert "warp_specialized" in _lowered(1024, 1024, 1024, (128, 128, 128, 4, 256), promote=1).annotations
    assert "warp_specialized" in _lowered(1024, 1024, 1024, (128, 192, 128, 3, 256), promote=2).annotations
    # one warpgroup (nothing to overlap its promotion with) and small tiles keep TmaPipeline
    assert "warp_specialized" not in _lowered(1024, 1024, 1024, (64, 128, 128, 4, 128), promote=1).annotations
    off = {PassConfigKey.TEGULA_WARP_SPECIALIZE: False}
    ex = _ex("gemm_fp8")
    f = ex.matmul_fp8.__wrapped__(1024, 1024, 1024, 128, 128, 128, 4, 256, promote=1)
    ks: list = []
    post_order_visit(lower(f, SM90, off), lambda n: ks.append(n) if isinstance(n, Kernel) else None)
    assert "warp_specialized" not in ks[0].annotations


@needs_compiler
@pytest.mark.parametrize("kw", [dict(promote=1), dict(scale_rows=True, scale_cols=True, bias=True, activation="gelu")],
                         ids=["promote", "epilogue"])
def test_compiles_for_sm90a(kw, tmp_path):
    from tegula import config

    with config.override(cache_dir=str(tmp_path)):
        k = _build(512, 512, 512, (128, 256, 128, 4, 256) if "bias" in kw else (128, 128, 128, 4, 256),
                   "cuda:sm_90a", **kw)
    src = k.get_kernel_source()
    assert "tl::wgmma_ss_fp8<" in src and "warpgroup_reg_alloc" in src
    assert k.artifact.cubin


# ----------------------------------------------------------------------------------------- gpu

def _torch_inputs(torch, M, N, K, fp8):
    a = torch.randn(M, K, device="cuda").to(fp8)
    b = torch.randn(N, K, device="cuda").to(fp8)
    return a, b, a.double() @ b.double().T


@pytest.mark.gpu
@pytest.mark.parametrize("in_dtype", ["float8_e4m3", "float8_e5m2"])
@pytest.mark.parametrize("tile, promote", [((128, 128, 128, 4, 256), 1), ((128, 192, 128, 3, 256), 2),
                                           ((64, 128, 64, 3, 128), 2)])
def test_promotion_on_gpu(in_dtype, tile, promote):
    torch = sm90a_gpu()
    fp8 = {"float8_e4m3": torch.float8_e4m3fn, "float8_e5m2": torch.float8_e5m2}[in_dtype]
    M, N, K = 640, 700, 1152  # ragged M and N; 9 k-tiles of 128, a tail after the last promotion of 2
    a, b, ref = _torch_inputs(torch, M, N, K, fp8)
    k = _build(M, N, K, tile, "cuda", in_dtype=in_dtype, out_dtype="float32", promote=promote)
    c = k(a, b).double()
    # fp8 products are exact; Hopper's fp8 wgmma adds them with fewer bits than float32 (measured
    # on an H200: 2.0e-4 promoting every 256 elements of K)
    assert float((c - ref).norm() / ref.norm()) < 5e-4


@pytest.mark.gpu
def test_promotion_keeps_precision_over_long_k():
    """The point of 2xAcc: over K = 16384 the promoted sum loses at most one promotion interval's
    worth of the tensor cores' reduced-precision accumulation (both errors are printed)."""
    torch = sm90a_gpu()
    M, N, K = 256, 256, 16384
    a, b, ref = _torch_inputs(torch, M, N, K, torch.float8_e4m3fn)
    errs = {}
    for promote in (0, 1):
        k = _build(M, N, K, (128, 128, 128, 4, 256), "cuda", out_dtype="float32", promote=promote)
        errs[promote] = float((k(a, b).double() - ref).norm() / ref.norm())
    print(f"relative error over K = {K}: plain {errs[0]:.2e}, promoted every 128 {errs[1]:.2e}")
    # measured on an H200: plain 3.1e-3, promoted 1.3e-4
    assert errs[1] < 5e-4
    assert errs[1] <= 1.5 * errs[0]


@pytest.mark.gpu
@pytest.mark.parametrize("activation", [None, "relu", "silu", "gelu"])
@pytest.mark.parametrize("out_dtype", ["bfloat16", "float32"])
def test_fused_epilogue_on_gpu(activation, out_dtype):
    torch = sm90a_gpu()
    M, N, K = 1000, 1300, 512
    a, b, ref = _torch_inputs(torch, M, N, K, torch.float8_e4m3fn)
    sa = (torch.rand(M, device="cuda") + 0.5) / K ** 0.5
    sb = torch.rand(N, device="cuda") + 0.5
    bias = torch.randn(N, device="cuda")
    k = _build(M, N, K, (128, 256, 128, 4, 256), "cuda", out_dtype=out_dtype, scale_rows=True, scale_cols=True,
               bias=True, activation=activation)
    c = k(a, b, sa, sb, bias).double()
    v = ref * sa.double()[:, None] * sb.double()[None, :] + bias.double()[None, :]
    want = {None: v, "relu": v.clamp_min(0), "silu": v * torch.sigmoid(v),
            "gelu": 0.5 * v * (1 + torch.tanh(0.7978845608028654 * (v + 0.044715 * v ** 3)))}[activation]
    assert torch.isfinite(c).all()
    # float32 out: the tensor cores' accumulation over K = 512 unpromoted (2.7e-4 measured on an H200)
    assert float((c - want).norm() / want.norm()) < (5e-3 if out_dtype == "bfloat16" else 1e-3)
