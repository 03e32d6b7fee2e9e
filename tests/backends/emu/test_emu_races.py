"""The emulator's checks: races with barrier insertion disabled, out-of-bounds accesses,
uninitialized shared reads, barrier divergence, cp.async data read in flight, and the option
that turns findings into warnings."""
from __future__ import annotations

import inspect

import numpy as np
import pytest

import tegula
import tegula.language as T
from tegula.backends.emu import RaceWarning, execute
from tegula.errors import OutOfBoundsError, RaceError
from tegula.ir import dtype as dt
from tegula.ir import stmt as S
from tegula.ir.buffer import Buffer
from tegula.ir.expr import Builtin, Var, const, select
from tegula.ir.span import Span
from tegula.passconfig import PassConfigKey

NO_BARRIERS = {PassConfigKey.TEGULA_DISABLE_BARRIER_INSERTION: True}
FILE = "test_emu_races.py"


def line_of(text: str) -> int:
    """The line of this file that holds ``text`` (first occurrence)."""
    src, start = inspect.getsourcelines(inspect.getmodule(line_of))
    for i, s in enumerate(src):
        if text in s and "line_of(" not in s:
            return start + i if start else i + 1
    raise AssertionError(text)


def here() -> Span:
    frame = inspect.currentframe().f_back  # type: ignore[union-attr]
    return Span(__file__, frame.f_lineno)  # type: ignore[union-attr]


def gemm_serial(M, N, K, bm=64, bn=64, bk=32):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=128) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            C_l = T.alloc_fragment((bm, bn), "float32")
            T.clear(C_l)
            for ko in T.serial(T.ceildiv(K, bk)):
                T.copy(A[by * bm, ko * bk], A_s)  # gemm: copy A
                T.copy(B[ko * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_l)  # gemm: mma
            T.copy(C_l, C[by * bm, bx * bn])
    return main


def softmax_staged(M, N, BM=4):
    """A softmax that stages its rows through shared memory (threads read rows other threads loaded)."""
    @T.prim_func
    def main(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, BM), threads=128) as bx:
            X_s = T.alloc_shared((BM, N), "float32")
            x = T.alloc_fragment((BM, N), "float32")
            mx = T.alloc_fragment((BM,), "float32")
            s = T.alloc_fragment((BM,), "float32")
            for i, j in T.Parallel(BM, N):
                X_s[i, j] = X[bx * BM + i, j]  # softmax: stage
            T.copy(X_s, x)  # softmax: load the staged rows
            T.reduce_max(x, mx, dim=1)
            for i, j in T.Parallel(BM, N):
                x[i, j] = T.exp(x[i, j] - mx[i])
            T.reduce_sum(x, s, dim=1)
            for i, j in T.Parallel(BM, N):
                Y[bx * BM + i, j] = x[i, j] / s[i]
    return main


def _inputs(rng, *shapes_dtypes):
    return [rng.standard_normal(s).astype(d) for s, d in shapes_dtypes]


def test_gemm_without_barriers_reports_the_race(rng):
    a, b = _inputs(rng, ((64, 64), np.float16), ((64, 64), np.float16))
    k = tegula.compile(gemm_serial(64, 64, 64), out_idx=[-1], target="cuda-emu", pass_configs=NO_BARRIERS)
    with pytest.raises(RaceError) as info:
        k(a, b)
    msg = str(info.value)
    assert msg.startswith("data race (read after write) on shared buffer 'A_s' element ")
    assert f"{FILE}:{line_of('# gemm: mma')}" in msg     # the read
    assert f"{FILE}:{line_of('# gemm: copy A')}" in msg  # the write
    assert msg.count("thread ") >= 2
    # with the barriers the pipeline inserts, the same kernel is race-free and right
    ok = tegula.compile(gemm_serial(64, 64, 64), out_idx=[-1], target="cuda-emu")
    np.testing.assert_allclose(ok(a, b), a.astype(np.float64) @ b.astype(np.float64), rtol=1e-3, atol=1e-3)


def test_gemm_race_between_iterations_is_write_after_read(rng):
    """With two k-steps, the second copy overwrites A_s while other threads may still read it."""
    a, b = _inputs(rng, ((64, 64), np.float16), ((64, 64), np.float16))
    k = tegula.compile(gemm_serial(64, 64, 64), out_idx=[-1], target="cuda-emu",
                       pass_configs={**NO_BARRIERS, PassConfigKey.TEGULA_EMU_RACES_AS_WARNINGS: True})
    with pytest.warns(RaceWarning) as record:
        c = k(a, b)
    kinds = {str(w.message).split(" on ")[0] for w in record}
    assert "data race (read after write)" in kinds and "data race (write after read)" in kinds
    # lockstep emulation still computes the intended result
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-3, atol=1e-3)


def test_softmax_without_barriers_reports_the_race(rng):
    (x,) = _inputs(rng, ((8, 128), np.float32))
    k = tegula.compile(softmax_staged(8, 128), out_idx=[-1], target="cuda-emu", pass_configs=NO_BARRIERS)
    with pytest.raises(RaceError) as info:
        k(x)
    msg = str(info.value)
    assert "data race (read after write) on shared buffer 'X_s'" in msg
    assert f"{FILE}:{line_of('# softmax: load the staged rows')}" in msg
    assert f"{FILE}:{line_of('# softmax: stage')}" in msg
    ok = tegula.compile(softmax_staged(8, 128), out_idx=[-1], target="cuda-emu")
    y = ok(x)
    ref = np.exp(x - x.max(1, keepdims=True))
    np.testing.assert_allclose(y, ref / ref.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)


def test_uninitialized_shared_read(rng):
    @T.prim_func
    def main(X: T.Tensor((128,), "float32"), Y: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as _:
            S_ = T.alloc_shared((128,), "float32")
            for i in T.Parallel(64):
                S_[i] = X[i]
            for i in T.Parallel(128):
                Y[i] = S_[i]  # uninit: reads the half never written

    k = tegula.compile(main, out_idx=[-1], target="cuda-emu")
    with pytest.raises(RaceError, match=r"read of uninitialized shared memory: 'S_' element (6[4-9]|[7-9]\d|1[0-2]\d)"):
        k(rng.standard_normal(128).astype(np.float32))
    with pytest.raises(RaceError, match=f"{FILE}:{line_of('# uninit: reads')}"):
        k(rng.standard_normal(128).astype(np.float32))


# ---------------------------------------------------------------------------------------------
# Hand-built thread-level kernels
# ---------------------------------------------------------------------------------------------

def _kernel(body, allocs=(), threads=64, params=(), name="k"):
    tx, bx = Var("tx"), Var("bx")
    k = S.Kernel(grid=(1,), threads=(threads,), block_vars=(bx,), allocs=tuple(allocs), body=body(tx),
                 thread_var=tx, span=here())
    return S.PrimFunc(name, tuple(params), k, span=here())


def test_out_of_bounds_global_read():
    A = Buffer("A", (64,), "float32")
    B = Buffer("B", (64,), "float32")
    f = _kernel(lambda tx: S.BufferStore(B, (tx,), A[tx + 1], span=here()), params=(A, B))
    with pytest.raises(OutOfBoundsError, match=r"thread 63 accesses index \[64\] out of bounds of global buffer 'A'"):
        execute(f, [np.zeros(64, np.float32), np.zeros(64, np.float32)])


def test_out_of_bounds_shared_and_local_writes():
    sm = Buffer("sm", (64,), "float32", scope="shared.dyn")
    loc = Buffer("loc", (4,), "float32", scope="local")
    f = _kernel(lambda tx: S.BufferStore(sm, (tx * 2,), 1.0, span=here()), allocs=(sm,))
    with pytest.raises(OutOfBoundsError, match=r"thread 32 accesses index \[64\] out of bounds of shared buffer 'sm'"):
        execute(f, [])
    g = _kernel(lambda tx: S.BufferStore(loc, (tx % 5,), 1.0, span=here()), allocs=(loc,))
    with pytest.raises(OutOfBoundsError, match=r"thread 4 accesses index \[4\] out of bounds of local buffer 'loc'"):
        execute(g, [])


def test_guarded_accesses_are_not_out_of_bounds():
    """Threads masked off by an ``if`` (or the untaken side of ``?:``) do not access memory."""
    A = Buffer("A", (40,), "float32")
    B = Buffer("B", (64,), "float32")
    f = _kernel(lambda tx: S.seq(
        S.IfThenElse(tx < 40, S.BufferStore(B, (tx,), A[tx], span=here()), span=here()),
        S.BufferStore(B, (tx,), select(tx < 40, A[tx], B[tx]), span=here())), params=(A, B))
    a = np.arange(40, dtype=np.float32)
    b = np.full(64, -1, np.float32)
    execute(f, [a, b])
    np.testing.assert_array_equal(b, np.concatenate([a, np.full(24, -1, np.float32)]))


def test_barrier_not_reached_by_all_threads():
    sync = S.Evaluate(Builtin("sync_threads", (), dt.bool_), span=here())
    f = _kernel(lambda tx: S.IfThenElse(tx < 32, sync, span=here()))
    with pytest.raises(RaceError, match=r"__syncthreads\(\) not reached by all threads: 32 of 64 threads"):
        execute(f, [])


def test_cp_async_data_read_before_the_wait():
    A = Buffer("A", (64,), "float32")
    B = Buffer("B", (64,), "float32")
    sm = Buffer("sm", (64,), "float32", scope="shared.dyn")

    def addr(load):
        return Builtin("address_of", (load,), dt.int64)

    def body(tx, wait):
        copy = S.Evaluate(Builtin("tl::cp_async_zfill", (addr(sm[tx]), addr(A[tx]), const(True)), dt.bool_, (("template", (4,)),)), span=here())
        commit = S.Evaluate(Builtin("tl::cp_async_commit", (), dt.bool_), span=here())
        waits = [S.Evaluate(Builtin("tl::cp_async_wait", (), dt.bool_, (("template", (0,)),)), span=here())] if wait else []
        read = S.BufferStore(B, (tx,), sm[tx], span=here())  # cp.async: own element, no barrier needed
        return S.seq(copy, commit, *waits, read)

    a = np.arange(64, dtype=np.float32)
    b = np.zeros(64, np.float32)
    execute(_kernel(lambda tx: body(tx, True), allocs=(sm,), params=(A, B)), [a, b])
    np.testing.assert_array_equal(b, a)
    with pytest.raises(RaceError, match="read of data still in flight on shared buffer 'sm' element 0"):
        execute(_kernel(lambda tx: body(tx, False), allocs=(sm,), params=(A, B)), [a, b])


def test_races_as_warnings_option(rng):
    (x,) = _inputs(rng, ((8, 128), np.float32))
    k = tegula.compile(softmax_staged(8, 128), out_idx=[-1], target="cuda-emu",
                       pass_configs={**NO_BARRIERS, "tegula.emu_races_as_warnings": True})
    with pytest.warns(RaceWarning, match="data race"):
        y = k(x)
    assert np.isfinite(y).all()


def test_the_log_of_extra_readers_stays_small_and_still_reports():
    """Three threads read one element again and again with no barrier: the log keeps one entry per
    reader and element (a reader's later read covers its earlier ones), and a write ordered after
    two of the readers only is still a write after read."""
    from tegula.backends.emu.context import BufInfo, Site
    from tegula.backends.emu.races import Reporter, Tracker
    from tegula.ir.buffer import Buffer

    buf = BufInfo(Buffer("s", (4,), "float32", scope="shared"), 0, "shared", 0, 0, 4)
    tr = Tracker(16, 4, [Site(None, buf, "load"), Site(None, buf, "store")], Reporter(False), nthreads=4)
    tr.write(tr.units(np.zeros(1, np.int64), 4), np.array([3]), 1, buf)
    tr.barrier()
    readers = np.array([0, 1, 2])
    for _ in range(5000):
        tr.read(tr.units(np.zeros(3, np.int64), 4), readers, 0, buf)
        tr.fence(readers)  # moves the readers' clocks on, as any synchronization of theirs does
    assert len(tr.xr[0]) <= 4096
    tr.acquire(np.array([3]), tr.release(np.array([1, 2])))  # thread 3 waits for threads 1 and 2 only
    with pytest.raises(RaceError, match=r"data race \(write after read\).*thread 3 writes it after thread 0 read it"):
        tr.write(tr.units(np.zeros(1, np.int64), 4), np.array([3]), 1, buf)


def test_a_barrier_of_the_threads_keeps_the_agents_logged_reads():
    """Three wgmma agents read one element; thread 0 is ordered after two of them (as by their
    wait_group), then __syncthreads(): its write still races with the third agent's read."""
    from tegula.backends.emu.context import BufInfo, Site
    from tegula.backends.emu.races import Reporter, Tracker
    from tegula.ir.buffer import Buffer

    buf = BufInfo(Buffer("s", (4,), "float32", scope="shared"), 0, "shared", 0, 0, 4)
    tr = Tracker(16, 4, [Site(None, buf, "wgmma"), Site(None, buf, "store")], Reporter(False), nthreads=2,
                 agents=3)
    agents = [tr.agent(f"warpgroup {g}'s wgmma", "wgmma") for g in range(3)]
    tr.write(tr.units(np.zeros(1, np.int64), 4), np.array([1]), 1, buf)
    tr.barrier()
    for a in agents:
        tr.join_agent(a, np.array([1]))  # issued by thread 1, after the write
        tr.read(tr.units(np.zeros(1, np.int64), 4), np.array([a]), 0, buf)
    seen = np.zeros(tr.vc.shape[0], np.int32)
    seen[agents[:2]] = tr.vc[agents[:2], agents[:2]]
    tr.acquire(np.array([0]), seen)
    tr.barrier()
    with pytest.raises(RaceError, match="write to a wgmma operand still being read.*warpgroup 2's wgmma"):
        tr.write(tr.units(np.zeros(1, np.int64), 4), np.array([0]), 1, buf)
