"""Views of a buffer under another shape (T.Tensor(shape, dtype, A.data), T.reshape, T.view)
and T.im2col: interpreter, emulator and compile-only CUDA, against float64 numpy."""
import numpy as np
import pytest

import tegula
import tegula.language as T
from tegula.errors import TegulaError, UnsupportedError


def conv2d(N=2, H=8, W=8, C=16, F=32, K=3, S=1, D=1, P=1, BM=64, BN=32, BK=32, stages=2):
    OH = (H + 2 * P - D * (K - 1) - 1) // S + 1
    OW = (W + 2 * P - D * (K - 1) - 1) // S + 1

    @T.prim_func
    def conv(img: T.Tensor((N, H, W, C), "float16"), wgt: T.Tensor((K, K, C, F), "float16"),
             out: T.Tensor((N, OH, OW, F), "float16")):
        with T.Kernel(T.ceildiv(F, BN), T.ceildiv(N * OH * OW, BM), threads=128) as (bx, by):
            patch = T.alloc_shared((BM, BK), "float16")
            w_s = T.alloc_shared((BK, BN), "float16")
            acc = T.alloc_fragment((BM, BN), "float32")
            o_s = T.alloc_shared((BM, BN), "float16")
            w_mat = T.Tensor((K * K * C, F), "float16", wgt.data)      # the weights as a matrix
            o_mat = T.Tensor((N * OH * OW, F), "float16", out.data)    # one row per output pixel
            T.clear(acc)
            for kt in T.Pipelined(T.ceildiv(K * K * C, BK), num_stages=stages):
                T.im2col(img, patch, by, kt, K, S, D, P)
                T.copy(w_mat[kt * BK, bx * BN], w_s)
                T.gemm(patch, w_s, acc)
            T.copy(acc, o_s)
            T.copy(o_s, o_mat[by * BM, bx * BN])

    return conv, (N, OH, OW, F)


def conv_reference(img, wgt, S=1, D=1, P=1):
    N, H, W, C = img.shape
    K, _, _, F = wgt.shape
    x = np.pad(img.astype(np.float64), ((0, 0), (P, P), (P, P), (0, 0)))
    OH = (H + 2 * P - D * (K - 1) - 1) // S + 1
    OW = (W + 2 * P - D * (K - 1) - 1) // S + 1
    out = np.zeros((N, OH, OW, F))
    for kh in range(K):
        for kw in range(K):
            win = x[:, kh * D:kh * D + S * (OH - 1) + 1:S, kw * D:kw * D + S * (OW - 1) + 1:S, :]
            out += win @ wgt[kh, kw].astype(np.float64)
    return out


@pytest.mark.parametrize("target", ["cpu", "cuda-emu"])
@pytest.mark.parametrize("geom", [dict(), dict(S=2, P=0, H=9, W=7), dict(D=2, P=2, C=8)])
def test_im2col_convolution_through_views(rng, target, geom):
    prim, oshape = conv2d(**geom)
    C = geom.get("C", 16)
    img = rng.standard_normal((2, geom.get("H", 8), geom.get("W", 8), C)).astype(np.float16)
    wgt = (rng.standard_normal((3, 3, C, 32)) / 8).astype(np.float16)
    out = tegula.compile(prim, out_idx=[-1], target=target)(img, wgt)
    ref = conv_reference(img, wgt, geom.get("S", 1), geom.get("D", 1), geom.get("P", 1))
    assert out.shape == oshape
    np.testing.assert_allclose(out.astype(np.float64), ref, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_im2col_convolution_compiles(arch):
    src = tegula.compile(conv2d()[0], out_idx=[-1], target=f"cuda:{arch}").get_kernel_source()
    assert "__global__" in src


def test_views_leave_no_trace_in_the_ir():
    text = conv2d()[0].script()
    assert "w_mat" not in text and "o_mat" not in text and "im2col" not in text


@T.prim_func
def reshaped(A: T.Tensor((4, 6, 8), "float32"), B: T.Tensor((8, 24), "float32")):
    with T.Kernel(1, threads=64) as bx:
        flat = T.reshape(A, (24, 8))           # global view, element reads
        s = T.alloc_shared((48,), "float32")
        s2 = T.view(s, (6, 8))                 # shared view, element writes
        for i, j in T.Parallel(6, 8):
            s2[i, j] = flat[i * 4 + 1, j] * 2.0
        for i, j in T.Parallel(8, 24):
            B[i, j] = T.if_then_else(j < 6, s[j * 8 + i], -1.0)


@pytest.mark.parametrize("target", ["cpu", "cuda-emu"])
def test_reshape_and_view_read_and_write_the_same_elements(rng, target):
    a = rng.standard_normal((4, 6, 8)).astype(np.float32)
    b = tegula.compile(reshaped, out_idx=[-1], target=target)(a)
    flat = a.astype(np.float64).reshape(24, 8)
    s = (flat[np.arange(6) * 4 + 1] * 2).reshape(48)
    want = np.full((8, 24), -1.0)
    for i in range(8):
        for j in range(6):
            want[i, j] = s[j * 8 + i]
    np.testing.assert_array_equal(b, want)


def test_a_view_of_a_local_buffer_is_an_error_at_its_line():
    # a fragment's view works as TileLang's (tests/language/test_dialect.py); a thread's own
    # local array has no block-wide shape to view
    with pytest.raises(UnsupportedError) as e:
        @T.prim_func
        def bad(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64) as bx:
                f = T.alloc_local((64,), "float32")
                g = T.reshape(f, (8, 8))  # noqa: F841
    assert "local" in str(e.value) and "g = T.reshape(f, (8, 8))" in str(e.value)


def conv1d_gemm(N=2, L=64, C=32, KL=3, F=32, BL=32, BC=16, stages=2):
    """A 1-d convolution as im2col + gemm: the patch tile (BL, KL, BC) is filled element by
    element and multiplied as its reshape (BL, KL*BC); the accumulator (2, BL/2, F) is the
    gemm's C through a reshape and is read back element by element under its own shape."""
    CB = C // BC

    @T.prim_func
    def conv(X: T.Tensor((N, L, C), "float16"), Wm: T.Tensor((CB, KL * BC, F), "float16"),
             O: T.Tensor((N, L, F), "float32")):
        with T.Kernel(T.ceildiv(L, BL), N, threads=128) as (bx, by):
            patch = T.alloc_shared((BL, KL, BC), "float16")
            w_s = T.alloc_shared((KL * BC, F), "float16")
            acc = T.alloc_fragment((2, BL // 2, F), "float32")
            T.clear(T.reshape(acc, (BL, F)))
            for cb in T.Pipelined(CB, num_stages=stages):
                for l, k, c in T.Parallel(BL, KL, BC):
                    patch[l, k, c] = T.if_then_else(bx * BL + l + k < L, X[by, bx * BL + l + k, cb * BC + c], 0)
                T.copy(Wm[cb, 0, 0], w_s)
                T.gemm(T.reshape(patch, (BL, KL * BC)), w_s, T.reshape(acc, (BL, F)))
            for h, l, f in T.Parallel(2, BL // 2, F):
                O[by, bx * BL + h * (BL // 2) + l, f] = acc[h, l, f]

    return conv


def conv1d_reference(x, w):
    """``O[n, l, f] = sum_{k, c} X[n, l + k, c] * W[k, c, f]`` (zero past the end), float64."""
    N, L, C = x.shape
    KL = w.shape[0]
    xp = np.concatenate([x.astype(np.float64), np.zeros((N, KL - 1, C))], axis=1)
    return sum(xp[:, k:k + L, :] @ w[k].astype(np.float64) for k in range(KL))


@pytest.mark.parametrize("target", ["cpu", "cuda-emu"])
def test_gemm_on_reshaped_shared_and_fragment_tiles(rng, target):
    N, L, C, KL, F, BC = 2, 64, 32, 3, 32, 16
    x = rng.standard_normal((N, L, C)).astype(np.float16)
    w = (rng.standard_normal((KL, C, F)) / 4).astype(np.float16)
    # the weights of channel block cb as a (KL*BC, F) matrix, row k*BC + c
    wm = np.ascontiguousarray(w.reshape(KL, C // BC, BC, F).transpose(1, 0, 2, 3).reshape(C // BC, KL * BC, F))
    o = tegula.compile(conv1d_gemm(N, L, C, KL, F, BC=BC), out_idx=[-1], target=target)(x, wm)
    np.testing.assert_allclose(o.astype(np.float64), conv1d_reference(x, w), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_gemm_on_reshaped_tiles_compiles(arch):
    src = tegula.compile(conv1d_gemm(), out_idx=[-1], target=f"cuda:{arch}").get_kernel_source()
    assert "__global__" in src


def test_a_tile_used_by_a_gemm_through_a_reshape_is_allocated_as_the_reshape():
    text = conv1d_gemm().script()
    assert 'T.alloc_shared((32, 48), "float16")' in text and "T.alloc_shared((32, 3, 16)" not in text
    assert 'T.alloc_fragment((32, 32), "float32")' in text and "T.alloc_fragment((2, 16, 32)" not in text


@T.prim_func
def reduced_through_a_reshape(A: T.Tensor((128,), "float32"), R: T.Tensor((4,), "float32")):
    with T.Kernel(1, threads=128) as bx:
        f = T.alloc_fragment((128,), "float32")
        r = T.alloc_fragment((4,), "float32")
        T.copy(A, f)                            # the tile under its own shape
        T.reduce_sum(T.reshape(f, (4, 32)), r, dim=1)
        T.copy(r, R)


@pytest.mark.parametrize("target", ["cpu", "cuda-emu"])
def test_reduce_over_a_reshaped_fragment(rng, target):
    a = rng.standard_normal(128).astype(np.float32)
    r = tegula.compile(reduced_through_a_reshape, out_idx=[-1], target=target)(a)
    np.testing.assert_allclose(r, a.astype(np.float64).reshape(4, 32).sum(1), rtol=1e-5, atol=1e-5)


def test_two_shapes_of_one_tile_in_tile_operations_are_an_error_at_the_line():
    with pytest.raises(UnsupportedError) as e:
        @T.prim_func
        def bad(A: T.Tensor((16, 16), "float16"), C: T.Tensor((16, 16), "float32")):
            with T.Kernel(1, threads=128) as bx:
                a_s = T.alloc_shared((256,), "float16")
                c = T.alloc_fragment((16, 16), "float32")
                a2 = T.view(a_s, (16, 16))
                T.gemm(a2, a2, c)
                T.fill(a_s, 0)
    msg = str(e.value)
    assert "two shapes" in msg and "T.fill(a_s, 0)" in msg and "tegula/language" not in msg


def test_a_tile_operation_on_a_view_of_global_memory_is_an_error_at_the_line():
    with pytest.raises(UnsupportedError) as e:
        @T.prim_func
        def bad(A: T.Tensor((256,), "float16")):
            with T.Kernel(1, threads=128) as bx:
                a2 = T.view(A, (16, 16))
                T.fill(a2, 1)
    msg = str(e.value)
    assert "global" in msg and "T.fill(a2, 1)" in msg and "tegula/language" not in msg


def test_a_gemm_on_a_view_of_part_of_a_tile_is_an_error_at_the_line():
    with pytest.raises(UnsupportedError) as e:
        @T.prim_func
        def bad(A: T.Tensor((16, 16), "float16"), C: T.Tensor((16, 16), "float32")):
            with T.Kernel(1, threads=128) as bx:
                a_s = T.alloc_shared((512,), "float16")
                c = T.alloc_fragment((16, 16), "float32")
                a2 = T.Tensor((16, 16), "float16", a_s.data)
                T.gemm(a2, a2, c)
    msg = str(e.value)
    assert "part of" in msg and "T.gemm(a2, a2, c)" in msg and "tegula/language" not in msg


def test_a_view_larger_than_its_buffer_is_an_error():
    with pytest.raises(TegulaError, match="more than"):
        @T.prim_func
        def bad(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64) as bx:
                v = T.Tensor((9, 8), "float32", A.data)  # noqa: F841


@T.prim_func
def transposed(A: T.Tensor((2, 32, 48), "float16"), B: T.Tensor((2, 48, 32), "float32")):
    with T.Kernel(1, threads=128) as bx:
        a_s = T.alloc_shared((2, 32, 48), "float16")
        b_s = T.alloc_shared((2, 48, 32), "float32")
        T.copy(A, a_s)
        T.transpose(a_s, b_s)
        T.copy(b_s, B)


@pytest.mark.parametrize("target", ["cpu", "cuda-emu"])
def test_transpose_swaps_the_last_two_dimensions(rng, target):
    a = rng.standard_normal((2, 32, 48)).astype(np.float16)
    b = tegula.compile(transposed, out_idx=[-1], target=target)(a)
    np.testing.assert_array_equal(b, a.astype(np.float64).transpose(0, 2, 1))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_transpose_compiles(arch):
    assert "__global__" in tegula.compile(transposed, out_idx=[-1], target=f"cuda:{arch}").get_kernel_source()


def test_transpose_of_mismatched_tiles_is_an_error_at_its_line():
    with pytest.raises(TegulaError) as e:
        @T.prim_func
        def bad(A: T.Tensor((16, 8), "float32")):
            with T.Kernel(1, threads=64) as bx:
                a = T.alloc_shared((16, 8), "float32")
                b = T.alloc_shared((16, 8), "float32")
                T.transpose(a, b)
    assert "transposes to (8, 16)" in str(e.value) and "T.transpose(a, b)" in str(e.value)


def test_reshape_keeps_every_element():
    with pytest.raises(TegulaError, match="has 48 elements"):
        @T.prim_func
        def bad(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64) as bx:
                v = T.reshape(A, (6, 8))  # noqa: F841


V = tegula.ir.expr.Var("v")


@T.prim_func
def with_let(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
    with T.Kernel(1, threads=128) as bx:
        for i in T.Parallel(128):
            B[i] = A[T.let(V, 127 - i, V)] * T.let(V, i, V + 1)


@pytest.mark.parametrize("target", ["cpu", "cuda-emu"])
def test_let_binds_a_variable_in_an_expression(rng, target):
    a = rng.standard_normal(128).astype(np.float32)
    b = tegula.compile(with_let, out_idx=[-1], target=target)(a)
    np.testing.assert_allclose(b, a.astype(np.float64)[::-1] * (np.arange(128) + 1), rtol=1e-6)
