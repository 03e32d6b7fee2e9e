"""Every example runs on target="cpu" at small shapes, on fresh random inputs, against float64.

Each example's ``main`` asserts its own tolerance; the tests here add the cases that matter for
each kernel (shapes that are not multiples of the tile, dynamic dims, both gemm styles, causal and
GQA attention) and check a few results directly.
"""
import subprocess
import sys

import numpy as np
import pytest

ALL = ["elementwise_add", "softmax", "gemm", "flash_attention", "rmsnorm", "gemm_int8", "write_a_pass",
       "splitk_gemm", "quantize", "linear_macro", "gemm_fp8", "torch_ops"]  # torch_ops: tests/torch


def test_every_example_is_listed(examples_dir):
    assert sorted(p.stem for p in examples_dir.glob("*.py")) == sorted(ALL)


@pytest.mark.parametrize("M, N", [(64, 64), (100, 70), (1, 3)])
def test_elementwise_add(example, seed, M, N):
    assert example("elementwise_add").main(M, N, target="cpu", seed=seed) < 0.05


def test_elementwise_add_float32_out(example, rng):
    ex = example("elementwise_add")
    import tegula as tilelang

    k = tilelang.compile(ex.elementwise_add(33, 65, out_dtype="float32"), out_idx=[-1], target="cpu")
    a = rng.standard_normal((33, 65)).astype(np.float16)
    b = rng.standard_normal((33, 65)).astype(np.float16)
    c = k(a, b)
    assert c.dtype == np.float32
    # float16 + float16 is a float16 sum (rounded once), then widened
    np.testing.assert_allclose(c, ex.reference(a, b), rtol=2.0 ** -11, atol=1e-7)
    np.testing.assert_array_equal(c, (a + b).astype(np.float32))


@pytest.mark.parametrize("M, N", [(64, 128), (45, 96)])
def test_softmax(example, seed, M, N):
    assert example("softmax").main(M, N, target="cpu", seed=seed) < 2e-3


def test_softmax_one_kernel_every_row_count(example, rng):
    import tegula as tilelang

    ex = example("softmax")
    k = tilelang.compile(ex.softmax(64), out_idx=[-1], target="cpu")
    for rows in (1, 7, 8, 9, 50):
        x = (3 * rng.standard_normal((rows, 64))).astype(np.float16)
        y = k(x)
        assert y.shape == (rows, 64)
        np.testing.assert_allclose(y.astype(np.float64), ex.reference(x), rtol=0, atol=2e-3)
        np.testing.assert_allclose(y.astype(np.float64).sum(-1), 1.0, atol=2e-2)


@pytest.mark.parametrize("M, N, K", [(128, 128, 64), (200, 130, 70), (17, 33, 5)])
def test_gemm_both_styles(example, seed, M, N, K):
    assert example("gemm").main(M, N, K, target="cpu", seed=seed) < 0.1


def test_gemm_torch_tensors(example, rng):
    torch = pytest.importorskip("torch")
    import tegula as tilelang

    ex = example("gemm")
    k = tilelang.compile(ex.matmul.get_tir(96, 80, 64, 64, 64, 32), out_idx=[-1], target="cpu")
    a = torch.from_numpy(rng.standard_normal((96, 64)).astype(np.float16))
    b = torch.from_numpy(rng.standard_normal((64, 80)).astype(np.float16))
    c = k(a, b)
    assert isinstance(c, torch.Tensor) and c.dtype == torch.float16
    ref = ex.reference(a.numpy(), b.numpy())
    assert (np.abs(c.double().numpy() - ref) <= ex.tolerance(ref, 64)).all()


def test_gemm_profiler(example):
    import tegula as tilelang

    ex = example("gemm")
    k = tilelang.compile(ex.matmul.get_tir(64, 64, 64, 64, 64, 32), out_idx=[-1], target="cpu")
    k.get_profiler().assert_allclose(lambda a, b: ex.reference(np.asarray(a), np.asarray(b)),
                                     rtol=1e-2, atol=1e-2)
    assert k.get_profiler().do_bench(n_warmup=1, n_repeat=2) > 0


@pytest.mark.parametrize("seq_len, dim", [(128, 64), (100, 32), (1, 16)])
def test_flash_attention(example, seed, seq_len, dim):
    # full, causal, GQA with 2 and 4 query heads per KV head
    assert example("flash_attention").main(2, 4, seq_len, dim, target="cpu", seed=seed) < 5e-3


@pytest.mark.parametrize("is_causal", [False, True])
def test_flash_attention_small_tiles(example, rng, is_causal):
    """Many key blocks (and a partial last one) exercise the online-softmax rescaling."""
    import tegula as tilelang

    ex = example("flash_attention")
    b, h, s, d, g = 1, 2, 77, 16, 2
    k = tilelang.compile(ex.flash_attention(b, h, s, d, is_causal, groups=g, block_M=16, block_N=16),
                         out_idx=[-1], target="cpu")
    q = (2 * rng.standard_normal((b, h, s, d))).astype(np.float16)
    kk = (2 * rng.standard_normal((b, h // g, s, d))).astype(np.float16)
    v = rng.standard_normal((b, h // g, s, d)).astype(np.float16)
    o = k(q, kk, v)
    np.testing.assert_allclose(o.astype(np.float64), ex.reference(q, kk, v, is_causal), rtol=0, atol=5e-3)


@pytest.mark.parametrize("M, N", [(16, 64), (13, 100)])
def test_rmsnorm(example, seed, M, N):
    assert example("rmsnorm").main(M, N, target="cpu", seed=seed) < 0.05


@pytest.mark.parametrize("M, N, K", [(64, 64, 64), (70, 50, 100)])
def test_gemm_int8(example, seed, M, N, K):
    assert example("gemm_int8").main(M, N, K, target="cpu", seed=seed) == 0


@pytest.mark.parametrize("M, N, K, split_k", [(64, 64, 256, 4), (50, 70, 300, 3), (32, 32, 64, 1)])
def test_splitk_gemm(example, seed, M, N, K, split_k):
    assert example("splitk_gemm").main(M, N, K, split_k, target="cpu", seed=seed) < 1e-2


@pytest.mark.parametrize("M, N", [(16, 64), (21, 100)])
def test_quantize(example, seed, M, N):
    example("quantize").main(M, N, target="cpu", seed=seed)


def test_quantize_zero_row(example, rng):
    import tegula as tilelang

    ex = example("quantize")
    x = rng.standard_normal((9, 40)).astype(np.float16)
    x[3] = 0
    q, s = tilelang.compile(ex.quantize_rows(9, 40), out_idx=[-2, -1], target="cpu")(x)
    assert (q[3] == 0).all() and s[3] > 0
    assert (np.abs(q).max(axis=1)[np.arange(9) != 3] == 127).all()


@pytest.mark.parametrize("M, N, K", [(64, 64, 64), (50, 30, 70)])
def test_linear_macro(example, seed, M, N, K):
    assert example("linear_macro").main(M, N, K, target="cpu", seed=seed) < 0.05


@pytest.mark.parametrize("promote, activation", [(0, None), (1, "silu"), (2, "gelu")])
def test_gemm_fp8(example, seed, promote, activation):
    # K = 320: five k-tiles of 64, so promoting every 2 leaves a tail
    assert example("gemm_fp8").main(64, 128, 320, target="cpu", seed=seed, promote=promote,
                                     activation=activation) < 1e-6


@pytest.mark.parametrize("name", ["elementwise_add", "softmax", "rmsnorm"])
def test_example_runs_as_script(examples_dir, name):
    r = subprocess.run([sys.executable, str(examples_dir / f"{name}.py"), "--M", "20", "--N", "64",
                        "--target", "cpu"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "max error" in r.stdout
