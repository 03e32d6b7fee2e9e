"""Statements the emulator runs together (``backends/emu/batch.py``): unrolled element loops as one
vector store, runs of mma.sync as one batched product and runs of ldmatrix as one gather give what
running them one at a time gives, bit for bit, with the same race and bounds reports, in far fewer
steps.

Before batching, the corpus's ``gemm/example_gemm_intrinsics`` at 1024^3 took about 460 s per
kernel call on the interpreter (32 mma.sync and 64 element stores per k-step, each a statement)."""
from __future__ import annotations

import numpy as np
import pytest

import tegula
import tegula.language as T
from tegula.backends.emu import races, stmts, warp
from tegula.errors import OutOfBoundsError, RaceError
from tegula.passconfig import PassConfigKey

from tests.language.test_mma_emitter import _inputs, emitter_gemm


@pytest.fixture
def one_at_a_time(monkeypatch):
    """Turn batching off (the emulator as it ran before)."""
    monkeypatch.setattr(stmts, "batchable_loop", lambda s, ctx: False)
    monkeypatch.setattr(stmts, "batchable_copy", lambda s, ctx: False)
    monkeypatch.setattr(stmts, "mma_runs", lambda ss, ctx, table: [(i, i + 1) for i in range(len(ss))])


def _count(monkeypatch, obj, name, what: str = "") -> list:
    """Count the calls of ``obj.name`` (those with ``what`` among their arguments, if given)."""
    calls = [0]
    inner = getattr(obj, name)

    def counted(*a, **k):
        if not what or a[-1] == what:
            calls[0] += 1
        return inner(*a, **k)
    monkeypatch.setattr(obj, name, counted)
    return calls


@T.prim_func
def _copy_reverse(A: T.Tensor((64, 32), "float16"), B: T.Tensor((64, 32), "float32")):
    with T.Kernel(2, threads=128) as bx:
        _tx = T.get_thread_binding()
        S = T.alloc_shared((64, 32), "float16")
        for i, j in T.Parallel(64, 32):
            S[i, j] = A[i, j] * (bx + 2.0)
        for i, j in T.Parallel(64, 32):
            B[i, j] = S[63 - i, j]


def _run(f, *args):
    out = [a.copy() for a in args]
    tegula.compile(f, target="cuda-emu")(*out)
    return out


def test_element_loops_run_as_one_store(monkeypatch, rng):
    a = rng.standard_normal((64, 32)).astype(np.float16)
    b = np.full((64, 32), np.nan, np.float32)
    writes = _count(monkeypatch, races.Tracker, "write")
    reads = _count(monkeypatch, races.Tracker, "read")
    _, got = _run(_copy_reverse, a, b)
    # each of the 2 blocks: one shared store and one shared load (16 of each one at a time)
    assert (writes[0], reads[0]) == (2, 2)
    np.testing.assert_array_equal(got, (a[::-1].astype(np.float64) * 3).astype(np.float16).astype(np.float32))


def test_element_loops_one_at_a_time_agree(monkeypatch, one_at_a_time, rng):
    a = rng.standard_normal((64, 32)).astype(np.float16)
    b = np.full((64, 32), np.nan, np.float32)
    writes = _count(monkeypatch, races.Tracker, "write")
    _, got = _run(_copy_reverse, a, b)
    assert writes[0] == 2 * 16
    np.testing.assert_array_equal(got, (a[::-1].astype(np.float64) * 3).astype(np.float16).astype(np.float32))


@pytest.mark.parametrize("dtype, accum", [("float16", "float32"), ("bfloat16", "float32"), ("int8", "int32")])
def test_mma_runs_match_one_at_a_time_bit_for_bit(monkeypatch, dtype, accum, rng):
    M, N, K = 64, 64, 128
    a, b = _inputs(rng, dtype, M, N, K, True)
    c0 = np.full((M, N), -7, np.float32 if accum == "float32" else np.int32)
    f = emitter_gemm(M, N, K, dtype, accum, True, True, False)
    products = _count(monkeypatch, warp, "read_elems", "mma A fragment")
    rows = _count(monkeypatch, warp, "read_elems", "ldmatrix row")
    gathers = _count(monkeypatch, races.Tracker, "read")
    batched = _run(f, a, b, c0)[2]
    assert products[0] == 0  # no mma read its fragments one statement at a time
    assert rows[0] == 0      # nor an ldmatrix its rows
    micro_k = 32 if dtype == "int8" else 16
    assert gathers[0] == (K // micro_k) * 2  # one shared read for A, one for B per k-step
    monkeypatch.setattr(stmts, "mma_runs", lambda ss, ctx, table: [(i, i + 1) for i in range(len(ss))])
    single = _run(f, a, b, c0)[2]
    assert products[0] == (K // micro_k) * 2 * 2 * 2  # one block: k-steps x 2 x 2 tiles x 2 halves
    np.testing.assert_array_equal(batched, single)
    ref = a.astype(np.float64) @ b.astype(np.float64).T
    if dtype == "int8":
        np.testing.assert_array_equal(batched, ref.astype(np.int64))
    else:
        np.testing.assert_allclose(batched, ref, rtol=1e-4, atol=1e-3)


@T.prim_func
def _colliding(A: T.Tensor((64, 32), "float32"), B: T.Tensor((32, 32), "float32")):
    with T.Kernel(1, threads=128) as _:
        _tx = T.get_thread_binding()
        S = T.alloc_shared((32, 32), "float32")
        for i, j in T.Parallel(64, 32):
            S[i // 2, j] = A[i, j]
        for i, j in T.Parallel(32, 32):
            B[i, j] = S[i, j]


@pytest.mark.parametrize("batched", [True, False])
def test_two_threads_writing_one_element_is_still_a_race(monkeypatch, batched, rng):
    if not batched:
        monkeypatch.setattr(stmts, "batchable_loop", lambda s, ctx: False)
    a = rng.standard_normal((64, 32)).astype(np.float32)
    with pytest.raises(RaceError, match=r"data race \(write after write\) on shared buffer 'S'"):
        _run(_colliding, a, np.zeros((32, 32), np.float32))


@T.prim_func
def _shift_in_shared(A: T.Tensor((64, 32), "float32"), B: T.Tensor((64, 32), "float32")):
    with T.Kernel(1, threads=128) as _:
        _tx = T.get_thread_binding()
        S = T.alloc_shared((64, 32), "float32")
        R = T.alloc_shared((64, 32), "float32")
        for i, j in T.Parallel(64, 32):
            S[i, j] = A[i, j]
        for i, j in T.Parallel(64, 32):
            R[i, j] = S[63 - i, j] + 1.0
        for i, j in T.Parallel(64, 32):
            B[i, j] = R[i, j]


def test_a_loop_reading_its_own_scope_runs_one_iteration_at_a_time(monkeypatch, rng):
    """Shared buffers may share bytes: a shared -> shared loop is not batched (global -> shared
    and shared -> global are)."""
    a = rng.standard_normal((64, 32)).astype(np.float32)
    writes = _count(monkeypatch, races.Tracker, "write")
    _, got = _run(_shift_in_shared, a, np.full((64, 32), np.nan, np.float32))
    assert writes[0] == 1 + 16
    np.testing.assert_array_equal(got, a[::-1] + np.float32(1))


@T.prim_func
def _past_the_end(A: T.Tensor((64, 32), "float32"), B: T.Tensor((64, 32), "float32")):
    with T.Kernel(1, threads=128) as _:
        tx = T.get_thread_binding()
        for k in T.unroll(16):
            B[k * 4 + tx // 32, tx % 32] = A[k * 4 + tx // 32 + 1, tx % 32]


@pytest.mark.parametrize("batched", [True, False])
def test_out_of_bounds_in_a_batched_loop_is_the_loops_error(monkeypatch, batched, rng):
    if not batched:
        monkeypatch.setattr(stmts, "batchable_loop", lambda s, ctx: False)
    a = rng.standard_normal((64, 32)).astype(np.float32)
    with pytest.raises(OutOfBoundsError, match=r"thread 96 accesses index \[64, 0\] out of bounds of "
                                               r"global buffer 'A' with shape \(64, 32\)"):
        _run(_past_the_end, a, np.zeros((64, 32), np.float32))


@T.prim_func
def _through_shared(A: T.Tensor((128, 64), "float16"), B: T.Tensor((128, 32), "float16")):
    with T.Kernel(2, threads=128) as bx:
        S = T.alloc_shared((64, 64), "float16")
        T.copy(A[bx * 64, 0], S)                   # 4 x copy_vec of 16 bytes per thread
        T.copy(S[:, 32:64], B[(1 - bx) * 64, 0])   # 2 x copy_vec, of other threads' vectors


@pytest.mark.parametrize("batched", [True, False])
def test_vector_copy_loops_run_as_one_gather_and_scatter(monkeypatch, batched, rng):
    if not batched:
        monkeypatch.setattr(stmts, "batchable_copy", lambda s, ctx: False)
    a = rng.standard_normal((128, 64)).astype(np.float16)
    writes = _count(monkeypatch, races.Tracker, "write")
    reads = _count(monkeypatch, races.Tracker, "read")
    got = _run(_through_shared, a, np.full((128, 32), np.nan, np.float16))[1]
    # per block: one shared write and one shared read (4 and 2 one iteration at a time)
    assert (writes[0], reads[0]) == ((2, 2) if batched else (8, 4))
    np.testing.assert_array_equal(got, np.concatenate([a[64:, 32:], a[:64, 32:]]))


@pytest.mark.parametrize("batched", [True, False])
def test_vector_copy_loop_without_a_barrier_is_still_a_race(monkeypatch, batched, rng):
    if not batched:
        monkeypatch.setattr(stmts, "batchable_copy", lambda s, ctx: False)
    a = rng.standard_normal((128, 64)).astype(np.float16)
    k = tegula.compile(_through_shared, target="cuda-emu",
                       pass_configs={PassConfigKey.TEGULA_DISABLE_BARRIER_INSERTION: True})
    with pytest.raises(RaceError, match=r"data race \(read after write\) on shared buffer 'S'"):
        k(a, np.zeros((128, 32), np.float16))
