"""The Hopper emulator (``cuda-emu:sm_90a``): TMA, mbarriers, wgmma and the async proxy run with
the PTX ISA's semantics, and each synchronization bug is reported with the buffer or barrier, the
element or phase, the threads or warpgroups and both kernel lines."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import tegula
import tegula.language as T
from tegula.backends.emu import execute
from tegula.backends.interp import execute as interpret
from tegula.errors import RaceError, SyncError
from tegula.ir import dtype as dt
from tegula.ir import expr as E
from tegula.ir import stmt as S
from tegula.ir.visitor import Mutator

from emu_util import assert_match, random_args
from hopper_util import Mutate, every, lowered, nth, sync_statements, without

TOL = 2e-3


@pytest.fixture(scope="module")
def gemm():
    f, low = lowered("gemm_tma")
    return f, low


def _run(low, f, rng):
    args = random_args(f, rng)
    ref = [a.copy() for a in args]
    interpret(f, ref)
    got = [a.copy() for a in args]
    execute(low, got)
    return ref, got


def _lines(msg: str, *fragments: str) -> None:
    for frag in fragments:
        assert frag in msg, f"{frag!r} not in:\n{msg}"


# -- semantics --------------------------------------------------------------------------------

def test_the_emulator_target_keeps_every_hopper_pass(rng):
    """``cuda-emu:sm_90a`` lowers with the whole sm_90a pipeline: none of its passes is dropped
    for the emulator's sake."""
    from emu_util import ex
    from tegula.transform import pipeline_for

    f = ex("gemm").matmul.get_tir(128, 64, 64, 64, 64, 32)
    k = tegula.compile(f, out_idx=[-1], target="cuda-emu:sm_90a")
    src = k.get_kernel_source()
    assert "tl::tma_load(" in src and "tl::wgmma_ss(" in src and "tl::mbarrier_wait(" in src
    a, b = (rng.standard_normal((128 if i == 0 else 64, 64)).astype(np.float16) for i in range(2))
    np.testing.assert_allclose(k(a, b).astype(np.float64), a.astype(np.float64) @ b.astype(np.float64),
                               rtol=2e-2, atol=2e-2)
    assert pipeline_for("cuda-emu:sm_90a").names() == pipeline_for("cuda:sm_90a").names()


def test_gemm_runs_the_lowered_hopper_code(gemm, rng):
    f, low = gemm
    src = low.script()
    assert "tl::tma_load(" in src and "tl::wgmma_ss(" in src and "tl::mbarrier_wait(" in src
    ref, got = _run(low, f, rng)
    assert_match(ref, got, TOL, TOL)


class _Rewrite(Mutator):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def visit_Builtin(self, e):
        e = self.generic_visit(e)
        return self.fn(e)


def test_a_wrong_descriptor_gives_a_wrong_result(gemm, rng):
    """The descriptor is what wgmma reads through: a wrong stride byte offset reads other bytes."""
    f, low = gemm

    def halve_sbo(e):
        if e.name == "tl::wgmma_desc" and int(e.args[2].value) == 1024:
            return dataclasses.replace(e, args=(e.args[0], e.args[1], E.const(256, dt.int32)))
        return e
    bad = _Rewrite(halve_sbo).visit(low)
    assert bad.script() != low.script()
    ref, got = _run(bad, f, rng)
    with pytest.raises(AssertionError):
        assert_match(ref, got, TOL, TOL)


def test_the_tensor_maps_swizzle_is_honoured(gemm, rng):
    """TMA writes each box through its map's swizzle; a map with another mode scrambles the tile
    that wgmma then reads (the descriptors still say the right mode)."""
    f, low = gemm
    k = low.body.stmts[0] if isinstance(low.body, S.SeqStmt) else low.body
    maps = k.annotations["tma_maps"]
    other = {0: 1, 1: 2, 2: 3, 3: 0}  # a mode whose width still holds the box row
    wrong = [dataclasses.replace(m, swizzle=other[m.swizzle]) for m in maps]
    k2 = dataclasses.replace(k, annotations={**k.annotations, "tma_maps": wrong})

    class Swap(Mutator):
        def visit_Kernel(self, node):
            return k2

    bad = Swap().visit(low)
    # the maps' variables are the same objects, so the loads find the changed maps
    ref, got = _run(bad, f, rng)
    with pytest.raises(AssertionError):
        assert_match(ref, got, TOL, TOL)


def test_wgmma_results_reach_registers_at_wait_group_only(gemm, rng):
    """With the wait_group moved after the epilogue's reads, those reads see the registers from
    before the wgmma: the emulator reports them instead of using stale values."""
    f, low = gemm
    i = nth(low, "tl::wgmma_wait_group")
    with pytest.raises(RaceError) as e:
        execute(without(low, i), random_args(f, rng))
    # the next iteration's TMA overwrites a stage the other warpgroup's wgmma may still read
    _lines(str(e.value), "warpgroup", "gemm.py:4")


# -- the checks -------------------------------------------------------------------------------

def _two_gemms():
    @T.prim_func
    def two(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16"),
            D: T.Tensor((64, 64), "float16"), E2: T.Tensor((64, 64), "float16"),
            C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((64, 64), "float16")
            B_s = T.alloc_shared((64, 64), "float16")
            D_s = T.alloc_shared((64, 64), "float16")
            E_s = T.alloc_shared((64, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            acc2 = T.alloc_fragment((64, 64), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, acc, clear_accum=True)
            T.copy(D, D_s)
            T.copy(E2, E_s)
            T.gemm(D_s, E_s, acc2, clear_accum=True)
            for i, j in T.Parallel(64, 64):
                acc[i, j] += acc2[i, j]
            T.copy(acc, C)
    return two


@pytest.mark.parametrize("target", ["cpu", "cuda-emu", "cuda-emu:sm_90a"])
def test_wgmma_reads_the_tile_that_owns_shared_bytes_now(rng, target):
    """D_s / E_s get A_s / B_s's bytes (their lifetimes do not overlap); the second wgmma reads
    them through descriptors that name only an address, which now belongs to D_s and E_s: no
    read "last written through another buffer" is reported."""
    k = tegula.compile(_two_gemms(), out_idx=[-1], target=target)
    if target == "cuda-emu:sm_90a":
        src = k.get_kernel_source()
        assert "wgmma_ss" in src and all(f"Buffer({b}, [4096], float16, shared.dyn): {o}" in src
                                         for b, o in (("A_s", 0), ("D_s", 0), ("B_s", 8192), ("E_s", 8192)))
    a, b, d, e = (rng.standard_normal((64, 64)).astype(np.float16) for _ in range(4))
    want = a.astype(np.float64) @ b.astype(np.float64) + d.astype(np.float64) @ e.astype(np.float64)
    np.testing.assert_allclose(k(a, b, d, e).astype(np.float64), want, rtol=1e-3, atol=1e-3)


def test_read_of_a_tma_destination_before_its_phase_completes(gemm, rng):
    f, low = gemm
    with pytest.raises(RaceError) as e:
        execute(without(low, nth(low, "tl::mbarrier_wait")), random_args(f, rng))
    msg = str(e.value)
    _lines(msg, "read of a TMA destination before its phase completes on shared buffer '",
           "warpgroup 0's wgmma reads it", "the TMA load on mbarrier 'k_full[0]'",
           "gemm.py:46  T.gemm(A_shared, B_shared, C_local)", "gemm.py:4")
    assert e.value.span is not None and e.value.span.line == 46


def test_missing_arrive_is_a_deadlock_naming_the_barrier_and_phase(gemm, rng):
    f, low = gemm
    with pytest.raises(SyncError) as e:
        execute(without(low, nth(low, "tl::mbarrier_arrive")), random_args(f, rng))
    _lines(str(e.value), "deadlock: threads 0-255 (warpgroups 0, 1) wait for phase 0 (parity 0) of mbarrier "
           "'k_full[0]', which never completes: it expects 1 arrival(s) more (of 1)",
           "initialized (count 1): gemm.py:43")


def test_transaction_bytes_that_never_balance(gemm, rng):
    f, low = gemm

    def more(s):
        b = s.value
        return S.Evaluate(dataclasses.replace(b, args=(b.args[0], E.const(int(b.args[1].value) * 2, dt.int32))))
    i = nth(low, "tl::mbarrier_expect_tx")
    with pytest.raises(SyncError) as e:
        execute(Mutate(i, more).visit(low), random_args(f, rng))
    _lines(str(e.value), "mbarrier 'k_full[0]'", "transaction byte(s) not delivered")

    def none(s):
        b = s.value
        return S.Evaluate(dataclasses.replace(b, args=(b.args[0], E.const(0, dt.int32))))
    with pytest.raises(SyncError) as e:
        execute(Mutate(i, none).visit(low), random_args(f, rng))
    _lines(str(e.value), "mbarrier 'k_full[0]'", "delivered that no expect_tx announced")


def test_generic_write_read_by_wgmma_without_proxy_fence(rng):
    f, low = lowered("gemm_cp_async")
    with pytest.raises(RaceError) as e:
        execute(without(low, nth(low, "tl::fence_proxy_async")), random_args(f, rng))
    _lines(str(e.value), "generic-proxy write read by the async proxy without fence.proxy.async on shared "
           "buffer '", "wgmma reads it through the async proxy after thread", "gemm.py:46", "gemm.py:4")


def test_accumulator_read_before_wait_group(rng):
    f, low = lowered("gemm_cp_async")
    with pytest.raises(RaceError) as e:
        execute(without(low, nth(low, "tl::wgmma_wait_group")), random_args(f, rng))
    _lines(str(e.value), "accumulator read before wgmma.wait_group: thread 0 reads register 'C_local'[0]",
           "gemm.py:47", "warpgroup 0's wgmma: gemm.py:46")


def test_accumulator_used_before_its_operands_are_pinned(rng):
    f, low = lowered("flash_attention")
    with pytest.raises(RaceError) as e:
        execute(without(low, nth(low, "tl::wgmma_fence_operands")), random_args(f, rng))
    _lines(str(e.value), "accumulator used before wgmma_fence_operands", "register 'S'[",
           "flash_attention.py:73")


def test_wgmma_without_its_fence(rng):
    f, low = lowered("flash_attention")
    with pytest.raises(RaceError) as e:
        execute(without(low, nth(low, "tl::wgmma_fence")), random_args(f, rng))
    _lines(str(e.value), "uses register 'S'[", "with no wgmma.fence in between", "flash_attention.py:73")


def test_stage_reused_before_the_other_warpgroup_released_it(gemm, rng):
    f, low = gemm
    loop_sync = [i for i, s in enumerate(sync_statements(low)) if s.value.name == "sync_threads"][1]
    with pytest.raises(RaceError) as e:
        execute(without(low, loop_sync), random_args(f, rng))
    _lines(str(e.value), "stage reused before the consumer released it (write after read) on shared buffer '",
           "the TMA load on mbarrier 'k_full[", "warpgroup 1's wgmma", "gemm.py:46")


def test_barrier_init_must_be_fenced_and_published(gemm, rng):
    f, low = gemm
    with pytest.raises(SyncError, match="whose initialization was not fenced for the async proxy"):
        execute(without(low, nth(low, "tl::fence_barrier_init")), random_args(f, rng))
    with pytest.raises(SyncError, match=r"by threads 1-255 .* before its initialization by thread 0 is ordered"):
        execute(without(low, nth(low, "sync_threads")), random_args(f, rng))


# -- warp specialization: producer and consumer warpgroups as tasks ---------------------------

def ws_kernel(rounds=6, S=2, drop_empty_wait=False, drop_consumer_arrive=False):
    @T.prim_func
    def ws(A: T.Tensor((rounds * 128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=256):
            tx = T.get_thread_binding()
            full = T.alloc_barrier([128] * S)
            empty = T.alloc_barrier([128] * S)
            ring = T.alloc_shared((S, 128), "float32")
            acc = T.alloc_local((1,), "float32")
            if tx >= 128:  # producer warpgroup
                for r in T.serial(rounds):
                    if not drop_empty_wait:
                        T.mbarrier_wait_parity(empty[r % S], ((r // S) + 1) % 2)  # ws: empty wait
                    ring[r % S, tx - 128] = A[r * 128 + tx - 128]  # ws: produce
                    T.mbarrier_arrive(full[r % S])
            else:  # consumer warpgroup
                acc[0] = 0.0
                for r in T.serial(rounds):
                    T.mbarrier_wait_parity(full[r % S], (r // S) % 2)
                    acc[0] += ring[r % S, (tx + 1) % 128]  # ws: consume
                    if not drop_consumer_arrive:
                        T.mbarrier_arrive(empty[r % S])
                B[tx] = acc[0]
    return ws


NO_BARRIERS = {"tegula.disable_barrier_insertion": True}


def test_warp_specialized_ring_runs(rng):
    a = rng.standard_normal(6 * 128).astype(np.float32)
    k = tegula.compile(ws_kernel(), out_idx=[-1], target="cuda-emu:sm_90a", pass_configs=NO_BARRIERS)
    np.testing.assert_allclose(k(a), np.roll(a.reshape(6, 128).astype(np.float64), -1, axis=1).sum(0),
                               rtol=1e-5, atol=1e-5)


def test_producer_overwriting_an_unreleased_stage_is_reported(rng):
    a = rng.standard_normal(6 * 128).astype(np.float32)
    k = tegula.compile(ws_kernel(drop_empty_wait=True), out_idx=[-1], target="cuda-emu:sm_90a",
                       pass_configs=NO_BARRIERS)
    with pytest.raises(RaceError) as e:
        k(a)
    _lines(str(e.value), "data race (write after read) on shared buffer 'ring' element",
           "test_emu_hopper.py", "# ws: consume", "# ws: produce")  # both lines: the store keeps its own


def test_consumer_that_never_releases_deadlocks_the_producer(rng):
    a = rng.standard_normal(6 * 128).astype(np.float32)
    k = tegula.compile(ws_kernel(drop_consumer_arrive=True), out_idx=[-1], target="cuda-emu:sm_90a",
                       pass_configs=NO_BARRIERS)
    with pytest.raises(SyncError) as e:
        k(a)
    _lines(str(e.value), "deadlock: threads 128-255 (warpgroup 1) wait for phase 0 (parity 0) of mbarrier "
           "'empty[0]'", "it expects 128 arrival(s) more (of 128)", "# ws: empty wait",
           "meanwhile threads 0-127 (warpgroup 0): threads 0-127 (warpgroup 0) wait for phase")



def test_waits_polled_with_try_wait_run_the_ring(rng):
    """Every wait of the ring polled (``while (!tl::mbarrier_try_wait(bar, parity)) {}``): the
    producer's first wait, for parity 1 of a fresh empty barrier, passes at once as a plain wait
    does, and the ring computes the same sums."""
    from tegula.backends.cuda.pipeline import lower
    from tegula.target import Target

    def polled(s):
        poll = E.Builtin("tl::mbarrier_try_wait", s.value.args, dt.bool_)
        return S.While(~poll, S.SeqStmt(()), span=s.span)

    low = every(lower(ws_kernel(), Target("cuda", "sm_90a"), NO_BARRIERS), "tl::mbarrier_wait", polled)
    a = rng.standard_normal(6 * 128).astype(np.float32)
    b = np.zeros(128, np.float32)
    execute(low, [a, b])
    np.testing.assert_allclose(b, np.roll(a.reshape(6, 128).astype(np.float64), -1, axis=1).sum(0),
                               rtol=1e-5, atol=1e-5)


def _regions_gemm(M, N, K, bm=64, bn=64, bk=32, stages=2, release=True):
    """TileLang's warp-specialized idiom: the producer's whole loop in ``T.ws(1)``, the consumer's
    whole loop in ``T.ws(0)`` after it (not one pair of regions per iteration)."""
    @T.prim_func
    def regions(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=256) as (bx, by):
            A_s = T.alloc_shared((stages, bm, bk), "float16")
            B_s = T.alloc_shared((stages, bk, bn), "float16")
            C_l = T.alloc_fragment((bm, bn), "float32")
            bars = T.alloc_barrier([128] * (2 * stages))  # full[0..S), empty[S..2S)
            with T.ws(1):
                for ko in range(T.ceildiv(K, bk)):
                    T.mbarrier_wait_parity(bars[ko % stages + stages], ((ko // stages) % 2) ^ 1)  # regions: free
                    T.tma_copy(A[by * bm:(by + 1) * bm, ko * bk:(ko + 1) * bk], A_s[ko % stages, :, :],
                               barrier=bars[ko % stages])
                    T.tma_copy(B[ko * bk, bx * bn], B_s[ko % stages, :, :], barrier=bars[ko % stages])
                    T.mbarrier_arrive(bars[ko % stages])
            with T.ws(0):
                T.clear(C_l)
                for ko in range(T.ceildiv(K, bk)):
                    T.mbarrier_wait_parity(bars[ko % stages], (ko // stages) % 2)  # regions: full
                    T.gemm(A_s[ko % stages, :, :], B_s[ko % stages, :, :], C_l)
                    if release:
                        T.mbarrier_arrive(bars[ko % stages + stages])
                T.copy(C_l, C[by * bm, bx * bn])
    return regions


@pytest.mark.parametrize("target", ["cpu", "cuda-emu:sm_90a"])
def test_warp_specialized_regions_run_side_by_side(rng, target):
    """The producer region runs 8 k-tiles through 2 stages: it waits for stages the consumer
    region, written after it, frees. The regions run at once (as on the GPU), not one after the
    other (a deadlock at the producer's third wait)."""
    M, N, K = 64, 128, 256
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    k = tegula.compile(_regions_gemm(M, N, K), out_idx=[-1], target=target)
    np.testing.assert_allclose(k(a, b).astype(np.float64), a.astype(np.float64) @ b.astype(np.float64),
                               rtol=1e-2, atol=0.05)
    if target == "cuda-emu:sm_90a":
        src = tegula.compile(_regions_gemm(M, N, K), out_idx=[-1], target="cuda:sm_90a").get_kernel_source()
        assert "tl::tma_load" in src and "wgmma" in src
        with pytest.raises(SyncError) as e:
            tegula.compile(_regions_gemm(M, N, K, release=False), out_idx=[-1], target=target)(a, b)
        _lines(str(e.value), "deadlock: threads 0-127 (warpgroup 0) wait for phase 1 (parity 1) of mbarrier "
               "'bars[0]'", "# regions: full", "meanwhile threads 128-255 (warpgroup 1): threads 128-255 "
               "(warpgroup 1) wait for phase 0 of mbarrier 'bars[2]'", "# regions: free")


def _broadcast_read_kernel(released_by):
    """Every consumer thread reads ring[0]; the last ``released_by`` of them arrive on ``empty``,
    after which the producer overwrites the ring."""
    @T.prim_func
    def bcast(A: T.Tensor((256,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=256):
            tx = T.get_thread_binding()
            full = T.alloc_barrier([128])
            empty = T.alloc_barrier([released_by])
            ring = T.alloc_shared((128,), "float32")
            acc = T.alloc_local((1,), "float32")
            if tx >= 128:
                ring[tx - 128] = A[tx - 128]
                T.mbarrier_arrive(full[0])
                T.mbarrier_wait_parity(empty[0], 0)
                ring[tx - 128] = A[tx]  # bcast: overwrite
            else:
                T.mbarrier_wait_parity(full[0], 0)
                acc[0] = ring[0]  # bcast: read
                if tx >= 128 - released_by:
                    T.mbarrier_arrive(empty[0])
                B[tx] = acc[0]
    return bcast


def test_a_write_after_a_read_by_many_threads_needs_all_of_them_ordered(rng):
    """128 threads read one element at once; the producer's overwrite is ordered after the 64
    that arrive on the empty barrier only: the other 64 race with it (the tracker's two reader
    slots hold two of the 128 readers; the rest are logged)."""
    a = rng.standard_normal(256).astype(np.float32)
    k = tegula.compile(_broadcast_read_kernel(128), out_idx=[-1], target="cuda-emu:sm_90a", pass_configs=NO_BARRIERS)
    np.testing.assert_array_equal(k(a), np.full(128, a[0], np.float32))
    k = tegula.compile(_broadcast_read_kernel(64), out_idx=[-1], target="cuda-emu:sm_90a", pass_configs=NO_BARRIERS)
    with pytest.raises(RaceError) as e:
        k(a)
    _lines(str(e.value), "data race (write after read) on shared buffer 'ring' element 0: thread 128 writes it "
           "after thread 0 read it", "# bcast: overwrite", "# bcast: read")


def _ws_overlap_gemm():
    """The example GEMM split by WarpSpecialize with one k-tile of wgmma in flight per consumer."""
    from emu_util import ex
    from tegula.backends.cuda.pipeline import lower
    from tegula.target import Target

    f = ex("gemm").matmul.get_tir(128, 256, 256, 128, 256, 64, 3, 256)
    low = lower(f, Target("cuda", "sm_90a"), {"tegula.warp_specialize": True, "tegula.wgmma_overlap": True})
    return f, low


def _wait_groups(low, n):
    return [i for i, s in enumerate(sync_statements(low))
            if s.value.name == "tl::wgmma_wait_group" and dict(s.value.attrs)["template"] == (n,)]


def test_overlapped_consumers_release_a_stage_only_after_its_wgmma_retired(rng):
    """As lowered it is clean and right; waiting for all but two groups instead of one frees the
    previous stage while its wgmma may still read it, which the emulator reports."""
    f, low = _ws_overlap_gemm()
    ref, got = _run(low, f, rng)
    assert_match(ref, got, TOL, TOL)
    (i,) = _wait_groups(low, 1)

    def two(node):
        return dataclasses.replace(node, value=dataclasses.replace(node.value, attrs=(("template", (2,)),)))

    with pytest.raises(RaceError) as e:
        _run(Mutate(i, two).visit(low), f, rng)
    _lines(str(e.value), "stage reused before the consumer released it (write after read) on shared buffer",
           "warpgroup 0's wgmma: gemm.py:", "T.gemm(A_shared, B_shared, C_local)")


def test_overlapped_consumers_drain_before_the_epilogue(rng):
    f, low = _ws_overlap_gemm()
    (i,) = _wait_groups(low, 0)  # the drain after the loop
    with pytest.raises(RaceError) as e:
        _run(without(low, i), f, rng)
    _lines(str(e.value), "accumulator read before wgmma.wait_group: thread 0 reads register 'C_local'",
           "gemm.py:47  T.copy(C_local, C[by * block_M, bx * block_N])")


# -- TMA stores (hand-built thread-level IR: the lowering emits none yet) ----------------------

def _tma_store_kernel(fence=True, wait=True, overwrite=False, empty_group=False):
    from tegula.backends.cuda.passes.lower_tile_ops.lower_tma import TmaMap
    from tegula.ir.buffer import Buffer
    from tegula.ir.expr import Builtin, Var, const
    from tegula.ir.span import Span
    import inspect

    def here():
        return Span(__file__, inspect.currentframe().f_back.f_lineno)

    O = Buffer("O", (64, 64), "float16")
    sm = Buffer("S", (64 * 64,), "float16", scope="shared.dyn")
    tx, bx, j = Var("tx"), Var("bx"), Var("j")
    tmap = TmaMap(Var("O_tmap_0", dt.uint64), O, (64, 64), 3)  # 128-byte swizzle

    def call(name, *args, tpl=None):
        attrs = (("template", tpl),) if tpl is not None else ()
        line = Span(__file__, inspect.currentframe().f_back.f_lineno)  # the caller's line
        return S.Evaluate(Builtin(name, tuple(args), dt.bool_, attrs), span=line)

    def addr(load):
        return Builtin("address_of", (load,), dt.int64)

    fill = S.For(j, const(0), 32, S.BufferStore(sm, (tx * 32 + j,), E.cast(dt.float16, (tx * 32 + j) % 1024),
                                                span=here()), "serial", 1, {}, span=here())  # store: fill
    store = [call("tl::tma_store", tmap.var, addr(sm[0]), const(0), const(0)),  # store: issue
             call("tl::tma_store_commit")]
    if empty_group:  # a second, empty group: waiting for all but the newest one waits for the store
        store.append(call("tl::tma_store_commit"))
    if wait:
        store.append(call("tl::tma_store_wait", tpl=(1 if empty_group else 0,)))
    body = [fill] + ([call("tl::fence_proxy_async")] if fence else []) + [call("sync_threads"),
            S.IfThenElse(E.compare("eq", tx, 0), S.seq(*store), span=here()), call("sync_threads")]
    if overwrite:
        body.append(S.BufferStore(sm, (tx,), E.cast(dt.float16, 0), span=here()))  # store: overwrite
    k = S.Kernel(grid=(1,), threads=(128,), block_vars=(bx,), allocs=(sm,), body=S.seq(*body),
                 thread_var=tx, annotations={"tma_maps": [tmap]}, span=here())
    return S.PrimFunc("tma_store", (O,), k, span=here())


def test_tma_store_writes_the_box_through_the_swizzle():
    from tegula.backends.emu.hopper import swizzle

    o = np.zeros((64, 64), np.float16)
    execute(_tma_store_kernel(), [o])
    src = (np.arange(4096) % 1024).astype(np.float16)
    want = src[swizzle(np.arange(4096, dtype=np.int64) * 2, 128) // 2].reshape(64, 64)
    np.testing.assert_array_equal(o, want)


def test_tma_store_of_generic_writes_needs_the_proxy_fence():
    with pytest.raises(RaceError) as e:
        execute(_tma_store_kernel(fence=False), [np.zeros((64, 64), np.float16)])
    _lines(str(e.value), "generic-proxy write read by the async proxy without fence.proxy.async on shared "
           "buffer 'S'", "thread 0's TMA store", "# store: issue", "# store: fill")


def test_tile_rewritten_before_the_tma_store_finished_reading_it():
    execute(_tma_store_kernel(overwrite=True), [np.zeros((64, 64), np.float16)])  # waited: fine
    execute(_tma_store_kernel(overwrite=True, empty_group=True), [np.zeros((64, 64), np.float16)])
    with pytest.raises(RaceError) as e:
        execute(_tma_store_kernel(wait=False, overwrite=True), [np.zeros((64, 64), np.float16)])
    _lines(str(e.value), "tile rewritten while a TMA store still reads it on shared buffer 'S'",
           "thread 0's TMA store",
           "# store: overwrite", "# store: issue")
