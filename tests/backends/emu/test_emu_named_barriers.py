"""Named barriers on the emulator (``T.sync_threads(id, count)`` = ``bar.sync``,
``T.named_barrier_arrive(id, count)`` = ``bar.arrive``): warpgroups that wait for each other run as
tasks of their own; a phase completes when ``count`` threads arrived, waiting or not; deadlocks,
wrong counts, arrivals twice in one phase and phases left open are reported at the user's line."""
import numpy as np
import pytest

import tegula
import tegula.language as T
from tegula.errors import KernelTypeError, SyncError


def _handoff(arrive=True, sync_count=256, twice=False, extra_arrive=False, by_id=False):
    """Warpgroup 0 writes a shared tile and arrives; warpgroup 1 waits there, then reads it."""
    @T.prim_func
    def main(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32")):
        with T.Kernel(1, threads=256) as bx:
            tx = T.get_thread_binding()
            S = T.alloc_shared((128,), "float32")
            if tx < 128:
                S[tx] = A[tx] * 2.0
                if arrive:
                    T.named_barrier_arrive(3 + tx // 128 if by_id else 3, 256)
                if twice:
                    T.named_barrier_arrive(3, 256)
            else:
                T.sync_threads(3, sync_count)
                B[tx] = S[tx - 128] + A[tx]
            if extra_arrive:
                if tx >= 128:
                    T.named_barrier_arrive(5, 256)
    return main


def _run(f, rng, target="cuda-emu"):
    a = rng.standard_normal(256).astype(np.float32)
    b = np.zeros(256, np.float32)
    tegula.compile(f, target=target)(a, b)
    return a, b


@pytest.mark.parametrize("target", ["cpu", "cuda-emu"])
@pytest.mark.parametrize("by_id", [False, True])
def test_bar_arrive_hands_a_tile_to_the_warpgroup_waiting_at_bar_sync(rng, by_id, target):
    a, b = _run(_handoff(by_id=by_id), rng, target)
    np.testing.assert_allclose(b[128:], a[:128] * 2.0 + a[128:], rtol=1e-6)


def test_without_the_arrive_the_wait_is_a_deadlock_at_the_users_line(rng):
    with pytest.raises(SyncError) as e:
        _run(_handoff(arrive=False), rng)
    msg = str(e.value)
    assert "deadlock: named barrier 3 waits for 256 threads, 128 of them arrived" in msg
    assert "test_emu_named_barriers.py:27" in msg and "T.sync_threads(3, sync_count)" in msg
    assert "tegula/backends" not in msg


def test_threads_meeting_with_different_counts_are_reported_with_both_lines(rng):
    with pytest.raises(SyncError) as e:
        _run(_handoff(sync_count=384), rng)
    msg = str(e.value)
    assert "named barrier 3: threads 128-255 (warpgroup 1) arrive (bar.sync) for 384 threads while threads " \
           "0-127 (warpgroup 0) arrived at the same phase for 256" in msg
    assert "test_emu_named_barriers.py:27" in msg and "test_emu_named_barriers.py:23" in msg


def test_an_arrival_twice_in_one_phase_is_reported(rng):
    with pytest.raises(SyncError) as e:
        _run(_handoff(twice=True), rng)
    msg = str(e.value)
    assert "named barrier 3: thread 0 arrives (bar.arrive) at a phase it already arrived at" in msg
    assert "thread 0 again: test_emu_named_barriers.py:25" in msg
    assert "thread 0 before: test_emu_named_barriers.py:23" in msg
    assert "a bar.sync or bar.arrive of the other threads of this barrier is missing" in msg


def test_an_arrival_nobody_waits_for_is_reported_when_the_block_ends(rng):
    with pytest.raises(SyncError) as e:
        _run(_handoff(extra_arrive=True), rng)
    msg = str(e.value)
    assert "the block ends with named barrier 5 expecting 128 more of its 256 threads: threads 128-255 " \
           "(warpgroup 1) arrived (bar.arrive)" in msg
    assert "test_emu_named_barriers.py:31" in msg


def test_more_threads_than_the_count_are_reported(rng):
    @T.prim_func
    def main(A: T.Tensor((256,), "float32")):
        with T.Kernel(1, threads=256) as bx:
            tx = T.get_thread_binding()
            if tx < 256:
                T.named_barrier_arrive(2, 128)
            A[tx] = 1.0
    with pytest.raises(SyncError, match="named barrier 2 for 128 threads reached by 256"):
        tegula.compile(main, target="cuda-emu")(np.zeros(256, np.float32))


def test_named_barrier_arrive_checks_its_arguments():
    def build(bid, n):
        @T.prim_func
        def main(A: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=128) as bx:
                T.get_thread_binding()
                T.named_barrier_arrive(bid, n)
        return main
    with pytest.raises(KernelTypeError, match="thread_count must be a positive multiple of 32, got 100"):
        build(1, 100)
    with pytest.raises(KernelTypeError, match="barrier_id must be 0..15, got 16"):
        build(16, 128)


def test_named_barrier_arrive_is_bar_arrive_in_cuda():
    from tegula.backends.cuda.pipeline import lower
    from tegula.backends.cuda.codegen import codegen
    from tegula.target import Target

    src = codegen(lower(_handoff(by_id=True), Target("cuda", "sm_90a"), {}), "sm_90a").source
    assert "tl::named_barrier_arrive(((tx >> 7) + 3), 256);" in src or \
           "tl::named_barrier_arrive((tx >> 7) + 3, 256);" in src, src
    assert "tl::named_barrier_sync(3, 256);" in src
