"""Kept subexpressions (``backends/memo.py``): pure per-lane index arithmetic computed once per
value of the integer scalars it depends on gives, on the interpreter and the emulator, what
computing it every time gives, bit for bit, with the same bounds reports; float scalars never
key; kept arrays cannot be written; keys that never recur stop being kept.

The corpus's convolution (8192 blocks x 36 k-steps of an im2col ``T.Parallel`` store) spends most
of its time in such arithmetic: ``(by * 64 + m) // 64 % 64`` is one array per block, ``(k_iter *
32 + k) // 384`` one per k-step, the same for every block."""
from __future__ import annotations

import numpy as np
import pytest

import tegula
import tegula.language as T
from tegula.backends import memo
from tegula.errors import OutOfBoundsError

TARGETS = ["cpu", "cuda-emu"]


def im2col_sum(N=2, H=8, W=8, C=16, BM=16, BK=16):
    """A 3x3 im2col of an NHWC input, padded by 1, summed over its columns per k-step: the
    convolution's index arithmetic (block-, step- and lane-dependent parts, a guarded load)."""
    K = 9 * C
    rows = N * H * W

    @T.prim_func
    def main(X: T.Tensor((N, H, W, C), "float32"), Y: T.Tensor((rows, K // BK), "float32")):
        with T.Kernel(rows // BM, threads=128) as by:
            S = T.alloc_shared((BM, BK), "float32")
            R = T.alloc_fragment((BM,), "float32")
            for ks in T.serial(K // BK):
                for m, k in T.Parallel(BM, BK):
                    S[m, k] = T.if_then_else(
                        ((by * BM + m) // W % H + (ks * BK + k) // (3 * C) - 1 >= 0)
                        & ((by * BM + m) // W % H + (ks * BK + k) // (3 * C) - 1 < H)
                        & ((by * BM + m) % W + (ks * BK + k) // C % 3 - 1 >= 0)
                        & ((by * BM + m) % W + (ks * BK + k) // C % 3 - 1 < W),
                        X[(by * BM + m) // (H * W), (by * BM + m) // W % H + (ks * BK + k) // (3 * C) - 1,
                          (by * BM + m) % W + (ks * BK + k) // C % 3 - 1, (ks * BK + k) % C],
                        T.float32(0.0))
                T.reduce_sum(S, R, dim=1)
                for m in T.Parallel(BM):
                    Y[by * BM + m, ks] = R[m]
    return main


def im2col_ref(x: np.ndarray, BK: int) -> np.ndarray:
    n, h, w, c = x.shape
    pad = np.zeros((n, h + 2, w + 2, c))
    pad[:, 1:-1, 1:-1] = x
    cols = np.stack([pad[:, kh:kh + h, kw:kw + w] for kh in range(3) for kw in range(3)], axis=3)
    cols = cols.reshape(n * h * w, 9 * c)
    return cols.reshape(n * h * w, -1, BK).sum(axis=2)


def _run(f, target, *args):
    out = [a.copy() for a in args]
    tegula.compile(f, target=target)(*out)
    return out


@pytest.fixture
def tables(monkeypatch):
    """Every Memo made while the test runs."""
    made = []
    inner = memo.Memo.__init__

    def init(self, *a, **k):
        inner(self, *a, **k)
        made.append(self)
    monkeypatch.setattr(memo.Memo, "__init__", init)
    return made


@pytest.mark.parametrize("target", TARGETS)
def test_kept_arithmetic_matches_computing_it_every_time(monkeypatch, tables, target, rng):
    f = im2col_sum()
    x = rng.standard_normal((2, 8, 8, 16)).astype(np.float32)
    y = np.full((128, 9), np.nan, np.float32)
    kept = _run(f, target, x, y)[1]
    hits = sum(rec[2] for m in tables for rec in m.tables.values())
    assert tables and hits > 0   # block- and step-only parts were computed once and reused
    monkeypatch.setattr(memo, "KEEP", False)
    every_time = _run(im2col_sum(), target, x, y)[1]
    np.testing.assert_array_equal(kept, every_time)
    np.testing.assert_allclose(kept, im2col_ref(x.astype(np.float64), 16), rtol=1e-5, atol=1e-5)


def shifted(n=64, B=4):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(B, threads=32) as bx:
            S = T.alloc_shared((n // B,), "float32")
            T.copy(A[bx * (n // B)], S)
            for s in T.serial(2):
                for i in T.Parallel(n // B):
                    Y[bx * (n // B) + i] = S[(i + s * (bx // 3)) * 1]
    return main


@pytest.mark.parametrize("keep", [True, False])
def test_out_of_bounds_with_a_kept_index_is_the_same_error(monkeypatch, keep, rng):
    """The last block's second step reads past the end; earlier steps ran the same expressions
    and kept their arrays."""
    monkeypatch.setattr(memo, "KEEP", keep)
    a = rng.standard_normal(64).astype(np.float32)
    with pytest.raises(OutOfBoundsError, match=r"index \[16\] is out of bounds of buffer 'S' with shape \(16,\)"):
        _run(shifted(), "cpu", a, np.zeros(64, np.float32))


def scaled(n=32):
    @T.prim_func
    def main(Y: T.Tensor((n,), "float32"), s: T.float32):
        with T.Kernel(1, threads=32) as _:
            for i in T.Parallel(n):
                Y[i] = T.Cast("float32", i) * s
    return main


@pytest.mark.parametrize("target", TARGETS)
def test_float_scalars_never_key(target):
    """0.0 and -0.0 are equal keys, but ``0 * s`` has the sign of ``s``."""
    k = tegula.compile(scaled(), target=target)
    y = np.zeros(32, np.float32)
    k(y, 0.0)
    assert not np.signbit(y[0])
    k(y, -0.0)
    assert np.signbit(y[0]) and (y == 0).all()


def test_kept_arrays_are_read_only_and_reused():
    calls = []

    def fn(env):
        calls.append(1)
        return np.arange(4) + env[1]
    m = memo.Memo(lambda v, ctx: None)
    f = m.wrap(fn, (((1, None),), ("tree",)))
    env = [None, np.int32(3)]
    a, b = f(env), f(env)
    assert a is b and len(calls) == 1
    with pytest.raises(ValueError):
        a[0] = 7
    env[1] = np.int32(4)
    np.testing.assert_array_equal(f(env), np.arange(4) + 4)
    assert memo.value_range(a) == (3, 6)


@pytest.mark.parametrize("key", [np.array(3), np.arange(4)], ids=["0-d", "1-d"])
@pytest.mark.parametrize("n_slots", [1, 2])
def test_an_array_key_computes_without_keeping(key, n_slots):
    """A key variable holding an array (a 0-d one, as numpy code traced by torch.compile gives
    scalars, or one value per block side by side) is computed each time: it was
    ``TypeError: unhashable type: 'numpy.ndarray'`` raised as an InternalError."""
    m = memo.Memo(lambda v, ctx: None)
    slots = tuple((s, None) for s in range(1, n_slots + 1))
    f = m.wrap(lambda env: np.arange(4) + env[1], (slots, ("tree",)))
    env = [None, key, np.int32(1)][:n_slots + 1]
    for _ in range(2):
        np.testing.assert_array_equal(f(env), np.arange(4) + key)
    (rec,) = m.tables.values()
    assert not rec[0]


def test_keys_that_never_recur_stop_being_kept():
    m = memo.Memo(lambda v, ctx: None)
    f = m.wrap(lambda env: np.arange(3) * env[1], (((1, None),), ("tree",)))
    for k in range(memo._TRIAL + 1):
        np.testing.assert_array_equal(f([None, np.int64(k)]), np.arange(3) * k)
    (rec,) = m.tables.values()
    assert rec[1] < 0 and not rec[0]   # off, and nothing held


def chain(i, depth):
    """``((i + 1) * 3 % 61 + 1) * 3 % 61 ...``: an index expression ``3 * depth`` nodes deep."""
    e = i
    for _ in range(depth):
        e = (e + 1) * 3 % 61
    return e


def deep(n=64, depth=60):
    @T.prim_func
    def main(Y: T.Tensor((n,), "int32")):
        with T.Kernel(1, threads=32) as _:
            for i in T.Parallel(n):
                Y[i] = chain(i, depth)
    return main


@pytest.mark.parametrize("target", TARGETS)
def test_each_node_of_a_deep_expression_is_walked_a_bounded_number_of_times(monkeypatch, target):
    """A compound node's dependencies come from its children's, found when they were compiled:
    compile time stays linear in the depth (it walked every subtree again at every node)."""
    visits = []
    inner = memo.Memo._walk

    def walk(self, e, ctx, found):
        visits.append(1)
        return inner(self, e, ctx, found)
    monkeypatch.setattr(memo.Memo, "_walk", walk)
    depth = 60
    y = np.zeros(64, np.int32)
    tegula.compile(deep(64, depth), target=target)(y)
    ref = np.arange(64)
    for _ in range(depth):
        ref = (ref + 1) * 3 % 61
    np.testing.assert_array_equal(y, ref)
    assert len(visits) < 12 * 3 * depth   # was about (3 * depth)^2 / 2
