"""Gemm operands widened once while their bytes stay the same (``backends/interp/operands.py``):
products bit for bit those of converting at every gemm, a tile written between two products
converted again, errors still at the user's line.

Each kernel runs on fresh random inputs with the kept conversions on and off (``_MAX_ELEMS = 0``
converts every operand, as before) and is checked against a float64 reference.
"""
import ml_dtypes
import numpy as np
import pytest

import tegula
import tegula.language as T
from tegula import config
from tegula.backends.interp import batch, execute, operands
from tegula.errors import OutOfBoundsError
from tegula_files import names_a_tegula_file
from test_interp_language import rand

BM, BN, D = 32, 16, 32   # a K tile of BM rows kept for the block, q tiles of BN rows streamed


def backward_like(S: int, dtype: str, acc: str = "float32"):
    """Attention's backward in small: the block's K tile feeds a gemm at every step, each step's
    q tile two gemms, and a tile copied to shared memory (its bytes those of a fragment) a third."""

    @T.prim_func
    def main(K: T.Tensor((S, D), dtype), Q: T.Tensor((S, D), dtype),
             dK: T.Tensor((S, D), acc), dQ: T.Tensor((S // BM, S, D), acc)):
        with T.Kernel(S // BM, threads=128) as bx:
            K_s = T.alloc_shared((BM, D), dtype)
            q_s = T.alloc_shared((BN, D), dtype)
            s_f = T.alloc_fragment((BM, BN), acc)
            s_c = T.alloc_fragment((BM, BN), dtype)
            s_sh = T.alloc_shared((BM, BN), dtype)
            dk = T.alloc_fragment((BM, D), acc)
            dq = T.alloc_fragment((BN, D), acc)
            T.copy(K[bx * BM, 0], K_s)
            T.clear(dk)
            for k in T.serial(S // BN):
                T.copy(Q[k * BN, 0], q_s)
                T.gemm(K_s, q_s, s_f, transpose_B=True, clear_accum=True)
                T.copy(s_f, s_c)
                T.gemm(s_c, q_s, dk)
                T.copy(s_c, s_sh)
                T.gemm(s_sh, K_s, dq, transpose_A=True, clear_accum=True)
                T.copy(dq, dQ[bx, k * BN, 0])
            T.copy(dk, dK[bx * BM, 0])
    return main


def run(func, args: list, keep: bool, batch: int = 1) -> list:
    """``func`` on copies of ``args``, blocks one by one (``batch=1``) or side by side."""
    args = [a.copy() for a in args]
    old = operands._MAX_ELEMS
    operands._MAX_ELEMS = old if keep else 0
    try:
        with config.override(interp_batch=batch):
            execute(func, args)
    finally:
        operands._MAX_ELEMS = old
    return args


def same_bits(x: np.ndarray, y: np.ndarray) -> bool:
    return x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()


def inputs(S: int, dtype: object, scale: float = 1.0) -> tuple:
    if np.dtype(dtype).kind == "i":
        return tuple(np.random.default_rng().integers(-3, 4, (S, D)).astype(dtype) for _ in range(2))
    return tuple((rand((S, D)) * scale).astype(dtype) for _ in range(2))


def reference(k: np.ndarray, q: np.ndarray, rnd: object, S: int) -> tuple:
    """float64 dK and dQ, the S tile rounded to ``rnd`` as the kernel's fragment copy does."""
    k64, q64 = k.astype(np.float64), q.astype(np.float64)
    dK = np.zeros((S, D))
    dQ = np.zeros((S // BM, S, D))
    for b in range(S // BM):
        kb = k64[b * BM:(b + 1) * BM]
        for j in range(S // BN):
            qj = q64[j * BN:(j + 1) * BN]
            s = (kb @ qj.T).astype(np.float32).astype(rnd).astype(np.float64)
            dK[b * BM:(b + 1) * BM] += s @ qj
            dQ[b, j * BN:(j + 1) * BN] = s.T @ kb
    return dK, dQ


@pytest.mark.parametrize("dtype, acc", [("float16", "float32"), ("bfloat16", "float32"),
                                        ("float8_e4m3", "float32"), ("int8", "int32")])
def test_kept_operands_bit_for_bit(dtype: str, acc: str) -> None:
    S = 64
    npd = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16,
           "float8_e4m3": ml_dtypes.float8_e4m3fn, "int8": np.int8}[dtype]
    k, q = inputs(S, npd, 0.5)
    out = [np.full((S, D), -7, acc), np.full((S // BM, S, D), -7, acc)]
    f = backward_like(S, dtype, acc)
    kept = run(f, [k, q, *out], keep=True)
    each = run(f, [k, q, *out], keep=False)
    assert same_bits(kept[2], each[2]) and same_bits(kept[3], each[3])
    before = batch.BLOCKS["batched"]
    side = run(f, [k, q, *out], keep=True, batch=64)   # blocks side by side: stacked tiles kept
    assert batch.BLOCKS["batched"] > before
    assert same_bits(side[2], each[2]) and same_bits(side[3], each[3])
    if acc == "int32":  # integers: exact, the S tile wraps into int8 at the fragment copy
        k64, q64 = k.astype(np.int64), q.astype(np.int64)
        for b in range(S // BM):
            kb = k64[b * BM:(b + 1) * BM]
            dk = sum((((kb @ q64[j * BN:(j + 1) * BN].T) + 128) % 256 - 128) @ q64[j * BN:(j + 1) * BN]
                     for j in range(S // BN))
            assert np.array_equal(kept[2][b * BM:(b + 1) * BM], dk)
        return
    dK, dQ = reference(k, q, npd, S)
    tol = {"float16": 2e-2, "bfloat16": 0.2, "float8_e4m3": 0.5}[dtype]
    np.testing.assert_allclose(kept[2], dK, rtol=tol, atol=tol)
    np.testing.assert_allclose(kept[3], dQ, rtol=tol, atol=tol)


def test_kept_operands_convert_less(monkeypatch: pytest.MonkeyPatch) -> None:
    # kept: K_s after its first use in a block, q_s after its first (the next block finds the
    # same q tiles kept), s_sh (the bytes of s_c); converted: s_c at every step
    S = 64
    k, q = inputs(S, np.float16)
    out = [np.zeros((S, D), np.float32), np.zeros((S // BM, S, D), np.float32)]
    calls = []
    widen = operands.ops.widen
    monkeypatch.setattr(operands.ops, "widen", lambda x, *a, **kw: calls.append(x.shape) or widen(x, *a, **kw))
    f = backward_like(S, "float16")
    counts = []
    for keep in (False, True):
        calls.clear()
        run(f, [k, q, *out], keep)
        counts.append(len(calls))
    steps = (S // BM) * (S // BN)
    assert counts[0] == 6 * steps
    assert counts[1] == steps + S // BN + S // BM


def test_kept_operands_agree_with_cuda_emu() -> None:
    S = 64
    k, q = inputs(S, np.float16, 0.5)
    out = [np.full((S, D), np.nan, np.float32), np.full((S // BM, S, D), np.nan, np.float32)]
    f = backward_like(S, "float16")
    got = run(f, [k, q, *out], keep=True)
    emu = [o.copy() for o in out]
    tegula.compile(f, target="cuda-emu")(k, q, *emu)
    dK, dQ = reference(k, q, np.float16, S)
    for g, e, r in zip(got[2:], emu, (dK, dQ)):
        np.testing.assert_allclose(g, r, rtol=2e-2, atol=2e-2)
        # summation order may differ, and so may the float16 rounding of an S element near a
        # tie, which moves the element's row by one float16 step times q
        np.testing.assert_allclose(e, g, rtol=5e-3, atol=5e-3)


@pytest.mark.parametrize("where", [(0, 0), (31, 15), (17, 6)])
def test_a_tile_written_between_products_is_converted_again(where: tuple) -> None:
    # one element of the kept tile changes between two gemms (the first, the last, one that the
    # sampled key may miss): the second product must see it
    i, j = where

    @T.prim_func
    def k(A: T.Tensor((32, 16), "float16"), B: T.Tensor((16, 32), "float16"),
          C: T.Tensor((2, 32, 32), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((32, 16), "float16")
            B_s = T.alloc_shared((16, 32), "float16")
            c = T.alloc_fragment((32, 32), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, c, clear_accum=True)
            T.copy(c, C[0, 0, 0])
            A_s[i, j] = A_s[i, j] + 1.0
            T.gemm(A_s, B_s, c, clear_accum=True)
            T.copy(c, C[1, 0, 0])

    a, b = rand((32, 16), np.float16), rand((16, 32), np.float16)
    c = np.full((2, 32, 32), np.nan, np.float32)
    kept, each = run(k, [a, b, c], keep=True), run(k, [a, b, c], keep=False)
    assert same_bits(kept[2], each[2])
    a2 = a.copy()
    a2[i, j] = np.float16(np.float32(a2[i, j]) + 1)
    np.testing.assert_allclose(kept[2][0], a.astype(np.float64) @ b.astype(np.float64), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(kept[2][1], a2.astype(np.float64) @ b.astype(np.float64), rtol=1e-5, atol=1e-5)
    assert not np.array_equal(kept[2][0][i], kept[2][1][i])


def test_out_of_bounds_region_still_names_the_users_line() -> None:
    @T.prim_func
    def k(A: T.Tensor((64, 16), "float16"), B: T.Tensor((16, 16), "float16"),
          C: T.Tensor((64, 16), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((64, 16), "float16")
            B_s = T.alloc_shared((16, 16), "float16")
            c = T.alloc_fragment((64, 16), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.clear(c)
            for s in T.serial(3):
                T.gemm(A_s[s * 24:s * 24 + 32, 0:16], B_s, c[s * 24:s * 24 + 32, 0:16])
            T.copy(c, C)

    a, b = rand((64, 16), np.float16), rand((16, 16), np.float16)
    with pytest.raises(OutOfBoundsError) as e:
        execute(k, [a, b, np.zeros((64, 16), np.float32)])
    msg = str(e.value)
    assert "region of 'c' starting at [48, 0] with extents [32, 16] is out of bounds" in msg
    assert "T.gemm(A_s[s * 24:s * 24 + 32, 0:16], B_s, c[s * 24:s * 24 + 32, 0:16])" in msg
    assert not names_a_tegula_file(msg)
