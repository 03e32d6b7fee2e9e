"""Blocks side by side (``tegula.backends.interp.batch``): the same memory, bit for bit, as one
block after another; launches the rule refuses run block by block; errors name the user's line.

Every kernel runs twice on fresh random inputs, with ``interp_batch=1`` (one block after another,
the definition) and batched (sizes that divide the grid and sizes that leave a partial batch),
and is checked against a float64 reference.
"""
import math

import numpy as np
import pytest

import tegula
import tegula.language as T
from tegula import config
from tegula.backends.interp import batch, execute
from tegula.errors import OutOfBoundsError
from tegula_files import names_a_tegula_file
from test_interp_language import attention_ref, flash_attention, matmul, rand


def run(func, args: list, size: int) -> tuple[list, dict]:
    """Run ``func`` on copies of ``args`` with at most ``size`` blocks side by side; the arrays
    and how many blocks ran batched / single."""
    args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    before = dict(batch.BLOCKS)
    with config.override(interp_batch=size):
        execute(func, args)
    return args, {k: batch.BLOCKS[k] - before[k] for k in before}


def same_bits(x: np.ndarray, y: np.ndarray) -> bool:
    return x.dtype == y.dtype and x.tobytes() == y.tobytes()


def check(func, args: list, sizes=(64, 3)) -> list:
    """Outputs batched equal, bit for bit, those one block after another; the batched runs
    really ran batched. Returns the one-by-one outputs."""
    ref, n = run(func, args, 1)
    assert n["batched"] == 0
    for size in sizes:
        got, n = run(func, args, size)
        assert n["batched"] > 0 and n["single"] == 0, n
        for a, b in zip(ref, got):
            if isinstance(a, np.ndarray):
                assert same_bits(a, b)
    return ref


def test_gemm_with_ragged_tails_batched() -> None:
    M, N, K = 150, 100, 90   # 3 x 2 blocks, tails out of bounds in M, N and K
    a, b = rand((M, K), np.float16), rand((K, N), np.float16)
    c = np.full((M, N), np.nan, np.float16)
    out = check(matmul(M, N, K, 64, 64, 32), [a, b, c], sizes=(64, 4))
    np.testing.assert_allclose(out[2], a.astype(np.float64) @ b.astype(np.float64),
                               rtol=2e-3, atol=2e-2)


@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_batched(causal: bool) -> None:
    # causal: the loop count differs per block (lanes masked), exp2, reductions, a gemm whose
    # A operand is a fragment
    q, k, v = (rand((2, 128, 2, 32), np.float16) for _ in range(3))
    o = np.full_like(q, np.nan)
    out = check(flash_attention(2, 2, 128, 32, 32, 32, causal), [q, k, v, o], sizes=(64, 5))
    np.testing.assert_allclose(out[3], attention_ref(q, k, v, causal), atol=5e-3, rtol=1e-2)


def test_convolution_im2col_batched() -> None:
    N, C, H, W, F, KS = 2, 8, 6, 6, 16, 3
    BM, BN, BK = 16, 16, 8
    OH, OW = H, W

    @T.prim_func
    def conv(data: T.Tensor((N, H, W, C), "float16"), kernel: T.Tensor((KS * KS * C, F), "float16"),
             out: T.Tensor((N * OH * OW, F), "float16")):
        with T.Kernel(T.ceildiv(F, BN), T.ceildiv(N * OH * OW, BM), threads=128) as (bx, by):
            d_s = T.alloc_shared((BM, BK), "float16")
            k_s = T.alloc_shared((BK, BN), "float16")
            acc = T.alloc_fragment((BM, BN), "float32")
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(KS * KS * C, BK), num_stages=2):
                T.im2col(data, d_s, by, k, KS, 1, 1, 1)
                T.copy(kernel[k * BK, bx * BN], k_s)
                T.gemm(d_s, k_s, acc)
            T.copy(acc, out[by * BM, bx * BN])

    d, kern = rand((N, H, W, C), np.float16), rand((KS * KS * C, F), np.float16)
    o = np.full((N * OH * OW, F), np.nan, np.float16)
    out = check(conv, [d, kern, o], sizes=(64, 7))
    x = np.pad(d.astype(np.float64), ((0, 0), (1, 1), (1, 1), (0, 0)))
    cols = np.stack([x[:, i:i + OH, j:j + OW, :] for i in range(KS) for j in range(KS)], 3)
    ref = cols.reshape(N * OH * OW, KS * KS * C) @ kern.astype(np.float64)
    np.testing.assert_allclose(out[2], ref, rtol=2e-3, atol=3e-2)


def test_block_dependent_branches_fill_scan_and_var_batched() -> None:
    M, bm = 96, 16

    @T.prim_func
    def k(X: T.Tensor((M, 8), "float32"), Y: T.Tensor((M, 8), "float32"),
          S: T.Tensor((M // bm,), "int32")):
        with T.Kernel(M // bm, threads=64) as bx:
            x = T.alloc_fragment((bm, 8), "float32")
            y = T.alloc_fragment((bm, 8), "float32")
            r = T.alloc_fragment((bm,), "float32")
            n = T.alloc_var("int32", init=0)
            T.fill(y, bx * 0.5)            # a value that differs per block
            if bx % 2 == 1:                 # a branch that differs per block, around tile ops
                T.copy(X[bx * bm, 0], x)
                T.cumsum(x, y, dim=1)
            for j in range(bx):             # a loop count that differs per block
                n = n + j
            T.reduce_sum(y, r, dim=1)
            for i, j in T.Parallel(bm, 8):
                Y[bx * bm + i, j] = y[i, j] + r[i]
            S[bx] = n

    x = rand((M, 8))
    y = np.full((M, 8), np.nan, np.float32)
    s = np.full((M // bm,), -1, np.int32)
    out = check(k, [x, y, s], sizes=(64, 4))
    ref = np.zeros((M, 8))
    for b in range(M // bm):
        rows = x[b * bm:(b + 1) * bm].astype(np.float64)
        t = np.cumsum(rows, 1) if b % 2 else np.full((bm, 8), b * 0.5)
        ref[b * bm:(b + 1) * bm] = t + t.sum(1, keepdims=True)
    np.testing.assert_allclose(out[1], ref, rtol=1e-5, atol=1e-5)
    assert out[2].tolist() == [b * (b - 1) // 2 for b in range(M // bm)]


def _refused(func, args: list) -> list:
    """Run ``func`` batched where allowed: every block ran single; returns the arrays."""
    got, n = run(func, args, 64)
    assert n["batched"] == 0 and n["single"] > 0, n
    return got


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_atomics_from_blocks_side_by_side_in_launch_order(dtype: str) -> None:
    # every block adds into rows its neighbours add into too, from a loop whose start and count
    # differ per block; and a block-level element add (made once per thread)
    R, bm = 12, 4

    @T.prim_func
    def k(X: T.Tensor((R * bm, 8), dtype), Out: T.Tensor((R * bm, 8), dtype),
          Cnt: T.Tensor((2,), "float32")):
        with T.Kernel(R, threads=32) as bx:
            x = T.alloc_fragment((bm, 8), dtype)
            T.copy(X[bx * bm, 0], x)
            for r in T.serial(bx // 3, bx // 3 + bx % 4):
                T.atomic_add(Out[r * bm:(r + 1) * bm, :], x)
            T.atomic_add(Cnt[bx % 2], bx * 0.25)

    x = rand((R * bm, 8), dtype)
    out = check(k, [x, np.zeros((R * bm, 8), dtype), np.zeros(2, np.float32)], sizes=(64, 5))
    ref = np.zeros((R * bm, 8))
    for b in range(R):
        for r in range(b // 3, b // 3 + b % 4):
            ref[r * bm:(r + 1) * bm] += x[b * bm:(b + 1) * bm].astype(np.float64)
    np.testing.assert_allclose(out[1].astype(np.float64), ref, rtol=1e-2, atol=1e-2)
    np.testing.assert_allclose(out[2], [32 * 0.25 * sum(range(0, R, 2)),
                                        32 * 0.25 * sum(range(1, R, 2))], rtol=1e-6)


def test_atomics_per_lane_run_block_by_block() -> None:
    @T.prim_func
    def k(X: T.Tensor((64,), "float32"), Out: T.Tensor((1,), "float32")):
        with T.Kernel(8, threads=32) as bx:
            x = T.alloc_fragment((8,), "float32")
            T.copy(X[bx * 8], x)
            for i in T.Parallel(8):
                T.atomic_add(Out[0], x[i])

    x = rand((64,))
    got = _refused(k, [x, np.zeros(1, np.float32)])
    np.testing.assert_allclose(got[1][0], x.astype(np.float64).sum(), rtol=1e-5)


def test_rule_refuses_atomics_into_what_the_kernel_reads() -> None:
    @T.prim_func
    def k(Out: T.Tensor((8,), "float32")):
        with T.Kernel(8, threads=32) as bx:
            T.atomic_add(Out[(bx + 1) % 8], Out[bx])

    assert batch.refusal(k.body) == "it reads global buffer 'Out', which it writes"
    o = rand((8,))
    got = _refused(k, [o])
    ref = o.copy()
    for b in range(8):
        v = ref[b]
        for _ in range(32):  # block-level code: every thread of the block makes the add
            ref[(b + 1) % 8] = ref[(b + 1) % 8] + v
    assert same_bits(got[0], ref)


def test_reading_what_the_kernel_writes_runs_block_by_block() -> None:
    @T.prim_func
    def k(A: T.Tensor((64,), "float32")):
        with T.Kernel(8, threads=32) as bx:
            x = T.alloc_fragment((8,), "float32")
            T.copy(A[bx * 8], x)              # block b reads the element block b-1 wrote
            for i in T.Parallel(8):
                A[(bx * 8 + i + 1) % 64] = x[i] * 2.0

    a = rand((64,))
    got = _refused(k, [a])
    ref = a.copy()
    for b in range(8):
        ref[(np.arange(8) + b * 8 + 1) % 64] = ref[np.arange(8) + b * 8] * np.float32(2)
    assert same_bits(got[0], ref)


def test_two_blocks_writing_one_element_last_block_wins() -> None:
    @T.prim_func
    def k(X: T.Tensor((16, 4), "float32"), Out: T.Tensor((8, 4), "float32")):
        with T.Kernel(16, threads=32) as bx:
            for j in T.Parallel(4):
                Out[bx // 2, j] = X[bx, j]   # blocks 2i and 2i+1 write row i: 2i+1 is last

    x = rand((16, 4))
    got = _refused(k, [x, np.full((8, 4), np.nan, np.float32)])
    assert same_bits(got[1], x[1::2].copy())


def test_out_of_bounds_in_a_batch_names_the_users_line() -> None:
    @T.prim_func
    def k(X: T.Tensor((40,), "float32"), Y: T.Tensor((40,), "float32")):
        with T.Kernel(6, threads=32) as bx:
            for i in T.Parallel(8):
                if bx * 8 + i < 40:
                    Y[bx * 8 + i] = X[bx * 8 + i] + 1.0
            Y[bx * 8 + 8] = X[0]   # block 4 stores at 40

    errors = []
    for size in (1, 64, 4):
        with pytest.raises(OutOfBoundsError) as e:
            run(k, [rand((40,)), np.zeros(40, np.float32)], size)
        errors.append(str(e.value))
    assert errors[0] == errors[1] == errors[2]
    assert "index [40] is out of bounds" in errors[0] and "Y[bx * 8 + 8] = X[0]" in errors[0]
    assert not names_a_tegula_file(errors[0])


def test_batch_setting() -> None:
    assert config.from_env({}).interp_batch == 64
    assert config.from_env({"TEGULA_INTERP_BATCH": "1"}).interp_batch == 1
    with pytest.raises(tegula.errors.ConfigError, match="TEGULA_INTERP_BATCH"):
        config.from_env({"TEGULA_INTERP_BATCH": "0"})


def test_batched_cpu_agrees_with_cuda_emu() -> None:
    # the interpreter batched against the emulator running the CUDA lowering
    M, N, K = 128, 64, 64
    a, b = rand((M, K), np.float16), rand((K, N), np.float16)
    f = matmul(M, N, K, 32, 32, 32)
    got, n = run(f, [a, b, np.full((M, N), np.nan, np.float16)], 64)
    assert n["batched"] == 8
    emu = tegula.compile(f, target="cuda-emu")
    c = np.full((M, N), np.nan, np.float16)
    emu(a, b, c)
    np.testing.assert_allclose(got[2].astype(np.float64), c.astype(np.float64), rtol=2e-3, atol=2e-2)
    assert math.isfinite(float(np.abs(got[2].astype(np.float64)).max()))


@pytest.mark.parametrize("dtype", ["float16", "float32", "int32"])
def test_block_level_element_add_once_per_thread(dtype: str) -> None:
    # every thread of the block makes the add (as in TileLang): one rounding after each
    @T.prim_func
    def k(V: T.Tensor((4,), dtype), Out: T.Tensor((2,), dtype)):
        with T.Kernel(4, threads=128) as bx:
            T.atomic_add(Out[bx % 2], V[bx])

    v = (rand((4,)) * 3).astype(dtype)
    out = check(k, [v, np.zeros(2, dtype)], sizes=(64,))
    ref = np.zeros(2, dtype)
    for b in range(4):
        for _ in range(128):
            ref[b % 2] = (ref[b % 2].astype(np.float32) + np.float32(v[b])).astype(dtype) \
                if dtype == "float16" else ref[b % 2] + v[b]
    assert same_bits(out[1], ref)


# -- what a failed batch leaves, what the batched form declines, internal errors ------------------

def _uneven_tiles():
    """Tiles whose extents differ per block: the batched form declines (UnsupportedError)."""
    @T.prim_func
    def k(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(8, threads=32) as bx:
            x = T.alloc_fragment((8,), "float32")
            T.fill(x, 0.0)
            T.copy(X[bx * 8:bx * 8 + bx % 3 + 1], x[0:bx % 3 + 1])
            T.copy(x, Y[bx * 8])
    return k


def _per_lane_atomics():
    """An atomic inside a T.Parallel loop: the batched form declines (ScopeError)."""
    @T.prim_func
    def k(X: T.Tensor((64,), "float32"), Out: T.Tensor((1,), "float32")):
        with T.Kernel(8, threads=32) as bx:
            for i in T.Parallel(8):
                T.atomic_add(Out[0], X[bx * 8 + i])
    return k


def test_an_error_in_a_batch_leaves_memory_as_block_by_block() -> None:
    # block 4 fails after every block stored its row: the rows of blocks 5..7 must not be there
    @T.prim_func
    def k(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(8, threads=32) as bx:
            for i in T.Parallel(8):
                Y[bx * 8 + i] = X[bx * 8 + i] + 1.0
            Y[bx * 16] = X[0]   # block 4 stores at 64

    x = rand((64,))
    left = []
    for size in (1, 64, 3):
        y = np.full(64, np.nan, np.float32)
        with pytest.raises(OutOfBoundsError, match=r"index \[64\]"):
            with config.override(interp_batch=size):
                execute(k, [x, y])
        left.append(y)
    ref = np.full(64, np.nan, np.float32)
    for b in range(5):
        ref[b * 8:b * 8 + 8] = x[b * 8:b * 8 + 8] + np.float32(1)
        if b < 4:
            ref[b * 16] = x[0]
    assert np.isnan(ref[40:48]).all() and np.isnan(ref[49:]).all()   # the rows of blocks 5..7
    assert same_bits(left[0], ref)
    assert same_bits(left[1], ref) and same_bits(left[2], ref)


def test_a_batch_failing_the_disjoint_check_starts_again_from_its_memory(monkeypatch) -> None:
    # the rerun block by block sees the memory from before the batch: the batch's writes are undone
    seen = []
    real = batch.disjoint

    def disjoint(records, size):
        ok = real(records, size)
        if not ok:
            seen.append(True)
        return ok
    monkeypatch.setattr(batch, "disjoint", disjoint)
    restored = []
    real_restore = batch.restore
    monkeypatch.setattr(batch, "restore", lambda env, rec: (restored.append(len(rec)), real_restore(env, rec)))

    @T.prim_func
    def k(X: T.Tensor((16, 4), "float32"), Out: T.Tensor((8, 4), "float32")):
        with T.Kernel(16, threads=32) as bx:
            for j in T.Parallel(4):
                Out[bx // 2, j] = X[bx, j]

    x = rand((16, 4))
    got = _refused(k, [x, np.full((8, 4), np.nan, np.float32)])
    assert seen and restored and restored[0] > 0
    assert same_bits(got[1], x[1::2].copy())


@pytest.mark.parametrize("make", [_uneven_tiles, _per_lane_atomics])
def test_forms_the_batch_declines_run_block_by_block(make) -> None:
    k = make()
    assert batch.refusal(k.body) is None   # the rule allows them; the batched compilation declines
    x = rand((64,))
    out = np.zeros(64 if make is _uneven_tiles else 1, np.float32)
    ref, _ = run(k, [x, out], 1)
    got = _refused(k, [x, out])
    assert same_bits(got[1], ref[1])


def test_a_bug_compiling_the_batch_is_an_internal_error(monkeypatch) -> None:
    def broken(*a, **kw):
        raise KeyError("lane")
    monkeypatch.setattr(batch, "batched_body", broken)
    k = _uneven_tiles()
    with pytest.raises(tegula.errors.InternalError) as e:
        run(k, [rand((64,)), np.zeros(64, np.float32)], 64)
    msg = str(e.value)
    assert "internal error in tegula: compiling the kernel's blocks side by side failed with KeyError" in msg
    assert "with T.Kernel(8, threads=32) as bx:" in msg and "TEGULA_INTERP_BATCH=1" in msg
    assert isinstance(e.value.__cause__, KeyError)
    assert not isinstance(e.value, tegula.errors.TegulaError)   # not the user's mistake


def test_a_bug_running_the_batch_is_an_internal_error_and_memory_is_put_back(monkeypatch) -> None:
    from tegula.backends.interp import tileops
    from tegula.ir.stmt import Fill

    real = tileops.BATCHED[Fill]

    def broken(s, ctx):
        fill = real(s, ctx)

        def run_(env):
            fill(env)
            raise ValueError("operands could not be broadcast together")
        return run_
    monkeypatch.setitem(tileops.BATCHED, Fill, broken)

    @T.prim_func
    def k(X: T.Tensor((64,), "float32"), Y: T.Tensor((64,), "float32")):
        with T.Kernel(8, threads=32) as bx:
            for i in T.Parallel(8):
                Y[bx * 8 + i] = X[bx * 8 + i]
            x = T.alloc_fragment((8,), "float32")
            T.fill(x, 1.0)
            T.copy(x, Y[bx * 8])

    y = np.full(64, np.nan, np.float32)
    with pytest.raises(tegula.errors.InternalError, match="running blocks 0..7 of the kernel side by side "
                       "failed with ValueError: operands could not be broadcast together"):
        with config.override(interp_batch=64):
            execute(k, [rand((64,)), y])
    assert np.isnan(y).all()   # the batch's stores were put back


@pytest.mark.parametrize("collide", [False, True])
def test_tiles_at_per_block_starts_and_writes_spread_over_a_buffer(collide: bool) -> None:
    # each block reads a tile at its own (row, column) start (gathered as windows) and writes it
    # transposed into a tile of a large output: the writes of a batch lie far apart. With
    # ``collide`` blocks 2i and 2i+1 write one tile: the batch runs again block by block and
    # the odd block (launched last) wins
    G, t = 6, 16

    @T.prim_func
    def k(A: T.Tensor((G * t, G * t), "float32"), Out: T.Tensor((G * t, G * t), "float32")):
        with T.Kernel(G, G, threads=32) as (bx, by):
            tile = T.alloc_shared((t, t), "float32")
            T.copy(A[by * t, bx * t], tile)
            for i, j in T.Parallel(t, t):
                if collide:
                    Out[(bx // 2) * t + j, by * t + i] = tile[i, j] + 1.0
                else:
                    Out[bx * t + j, by * t + i] = tile[i, j] + 1.0

    a = rand((G * t, G * t))
    out = np.full((G * t, G * t), np.nan, np.float32)
    if not collide:
        got = check(k, [a, out], sizes=(64, 4))[1]
        assert same_bits(got, (a + np.float32(1)).T.copy())
        return
    got, n = run(k, [a, out], 64)
    assert n["single"] > 0
    ref = np.full_like(out, np.nan)
    for by in range(G):
        for bx in range(G):
            ref[(bx // 2) * t:(bx // 2) * t + t, by * t:by * t + t] = \
                (a[by * t:by * t + t, bx * t:bx * t + t] + np.float32(1)).T
    assert same_bits(got[1], ref)
