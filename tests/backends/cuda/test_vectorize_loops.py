"""VectorizeLoops: ``T.vectorized`` element copies become vector copies where provably aligned.

Compile-only checks of the generated code for sm_80 and sm_90a, and results on ``cpu``,
``cuda-emu`` and ``cuda-emu:sm_90a`` (whose emulator checks every vector access's alignment)
against float64 on random inputs.
"""
import numpy as np
import pytest

import tegula
import tegula.language as T
from tegula import config
from tegula.backends.cuda.compiler import available_backends

needs_compiler = pytest.mark.skipif(not available_backends(), reason="no CUDA compiler (NVRTC or nvcc) here")


def splitk_gemv(N, K, BN=2, RT=32, TK=8, dtype="float16", skew=0):
    """``C = B a``: thread (tn, tk) of a block takes row ``tn`` of ``BN`` and the ``TK``-element
    chunks ``tk`` of every ``RT * TK`` columns, loaded with a ``T.vectorized`` loop; ``skew``
    shifts the chunks by that many elements (misaligned vectors)."""
    BK = RT * TK

    @T.prim_func
    def main(A: T.Tensor((K + skew,), dtype), B: T.Tensor((N, K + skew), dtype), C: T.Tensor((N,), "float32")):
        with T.Kernel(N // BN, threads=(BN, RT)) as bn:
            tn = T.get_thread_binding(0)
            tk = T.get_thread_binding(1)
            a = T.alloc_local((TK,), dtype)
            b = T.alloc_local((TK,), dtype)
            acc = T.alloc_local((1,), "float32")
            part = T.alloc_shared((BN,), "float32")
            if tk == 0:
                part[tn] = 0
            T.clear(acc)
            for kb in T.serial(K // BK):
                for k in T.vectorized(TK):
                    a[k] = A[kb * BK + tk * TK + k + skew]
                    b[k] = B[bn * BN + tn, kb * BK + tk * TK + k + skew]
                for k in T.serial(TK):
                    acc[0] += a[k].astype("float32") * b[k].astype("float32")
            T.atomic_add(part[tn], acc[0])
            C[bn * BN + tn] = part[tn]

    return main


def _src(f, target, tmp_path):
    """The kernel's CUDA source without its comments (which quote the kernel's lines)."""
    with config.override(cache_dir=str(tmp_path)):
        src = tegula.compile(f, target=target).get_kernel_source()
    return "\n".join(ln for ln in src.splitlines() if not ln.strip().startswith("//"))


@needs_compiler
@pytest.mark.parametrize("target", ["cuda:sm_80", "cuda:sm_90a"])
@pytest.mark.parametrize("TK, dtype, width", [(8, "float16", 16), (4, "float16", 8), (4, "float32", 16),
                                              (16, "float16", 16)])
def test_vectorized_copies_become_vector_copies(target, TK, dtype, width, tmp_path):
    src = _src(splitk_gemv(64, 1024, TK=TK, dtype=dtype), target, tmp_path)
    per = max(1, TK * np.dtype(dtype).itemsize // width)
    assert src.count(f"tl::copy_vec<{width}>(&a[") == per and src.count(f"tl::copy_vec<{width}>(&b[") == per
    assert "a[k] = " not in src


@needs_compiler
def test_misaligned_or_dependent_vectorized_loops_stay_loops(tmp_path):
    src = _src(splitk_gemv(64, 1024, skew=1), "cuda:sm_90a", tmp_path)
    assert "copy_vec" not in src and "a[k] = A[" in src

    @T.prim_func
    def shift(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=8) as bx:
            tx = T.get_thread_binding()
            r = T.alloc_local((9,), "float32")
            for k in T.vectorized(8):
                r[k] = X[tx * 8 + k]
            for k in T.vectorized(8):  # reads what it writes: stays a loop
                r[k + 1] = r[k]
            for k in T.vectorized(8):
                Y[tx * 8 + k] = r[k]

    src = _src(shift, "cuda:sm_80", tmp_path)
    assert "r[k + 1] = r[k];" in src
    # r holds 36 bytes (aligned to 4): 4-byte vectors in, the shifted copy out as well
    assert src.count("tl::copy_vec<4>(&r[") == 8 and src.count("tl::copy_vec<4>(&Y[") == 8


@pytest.mark.parametrize("target", ["cpu", "cuda-emu", "cuda-emu:sm_90a"])
@pytest.mark.parametrize("skew", [0, 1])
def test_splitk_gemv_results(target, skew, rng):
    N, K = 8, 512
    a = rng.standard_normal(K + skew).astype(np.float16)
    b = rng.standard_normal((N, K + skew)).astype(np.float16)
    c = np.full(N, np.nan, dtype=np.float32)
    k = tegula.compile(splitk_gemv(N, K, skew=skew), target=target)
    if target != "cpu":
        assert ("tl::copy_vec" in k.get_kernel_source()) == (skew == 0)
    k(a, b, c)
    ref = b[:, skew:].astype(np.float64) @ a[skew:].astype(np.float64)
    assert np.isfinite(c).all()
    assert np.linalg.norm(c - ref) / np.linalg.norm(ref) < 1e-3


@pytest.mark.gpu
@pytest.mark.parametrize("skew", [0, 1])
def test_splitk_gemv_on_gpu(skew, rng):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA GPU")
    N, K = 1024, 4096
    a = torch.tensor(rng.standard_normal(K + skew), dtype=torch.float16, device="cuda")
    b = torch.tensor(rng.standard_normal((N, K + skew)), dtype=torch.float16, device="cuda")
    c = torch.full((N,), float("nan"), device="cuda")
    k = tegula.compile(splitk_gemv(N, K, skew=skew), target="cuda")
    assert ("tl::copy_vec<16>" in k.get_kernel_source()) == (skew == 0)
    k(a, b, c)
    ref = b[:, skew:].double().cpu().numpy() @ a[skew:].double().cpu().numpy()
    out = c.double().cpu().numpy()
    assert np.isfinite(out).all()
    assert np.linalg.norm(out - ref) / np.linalg.norm(ref) < 1e-3
