"""InsertBarriers puts no barrier between iterations of a loop whose shared stores no two threads
share (each thread writes its own elements, and the loop reads none of them), and keeps one
where iterations can hand an element from one thread to another. The emulator's race checker
stays quiet on both, and they compute what the interpreter does."""
import numpy as np
import pytest

import tegula
import tegula.language as T
from tegula.backends.cuda.pipeline import lower
from tegula.ir.stmt import Evaluate, For
from tegula.ir.visitor import post_order_visit
from tegula.target import Target

SM80 = Target("cuda", "sm_80")


def epilogue():
    """The shape of TensorCoreIntrinEmitter.stmatrix: 4 x 4 x 8 unrolled stores per thread into
    a shared tile, each element owned by one thread, then a read of other threads' elements."""
    @T.prim_func
    def k(X: T.Tensor((128, 128), "float32"), Y: T.Tensor((128, 128), "float32")):
        with T.Kernel(1, threads=128) as bx:
            tx = T.get_thread_binding()
            lane = tx % 32
            warp = tx // 32
            S = T.alloc_shared((128, 128), "float32")
            for i in T.unroll(4):
                for j in T.unroll(4):
                    for e in T.unroll(8):
                        S[warp * 32 + i * 8 + lane // 4, j * 32 + (lane % 4) * 8 + e] = \
                            X[warp * 32 + i * 8 + lane // 4, j * 32 + (lane % 4) * 8 + e] * 2.0
            for r in T.serial(128):
                Y[r, tx] = S[r, 127 - tx]

    return k


def rotating():
    """Iteration i stores S[(tx + i) % 128]: thread t's element of one iteration is thread t+1's
    of the next, so the iterations must be ordered by a barrier."""
    @T.prim_func
    def k(X: T.Tensor((4, 128), "float32"), Y: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            tx = T.get_thread_binding()
            S = T.alloc_shared((128,), "float32")
            for i in T.unroll(4):
                S[(tx + i) % 128] = X[i, tx]
            Y[tx] = S[127 - tx]

    return k


def barriers_inside_loops(func) -> int:
    n = [0]

    def see(s):
        if isinstance(s, For):
            post_order_visit(s.body, lambda x: n.__setitem__(0, n[0] + (
                isinstance(x, Evaluate) and getattr(x.value, "name", "") == "sync_threads")))
    post_order_visit(func.body, see)
    return n[0]


def test_disjoint_unrolled_stores_get_no_barrier_inside_and_one_after():
    low = lower(epilogue(), SM80, {})
    src = low.script()
    assert barriers_inside_loops(low) == 0, src
    assert src.count("T.sync_threads") == 1, src  # before the other threads' elements are read


def test_iterations_that_hand_elements_over_keep_their_barrier():
    low = lower(rotating(), SM80, {})
    assert barriers_inside_loops(low) >= 1, low.script()


@pytest.mark.parametrize("target", ["cpu", "cuda-emu", "cuda-emu:sm_90a"])
def test_both_compute_what_the_interpreter_defines_without_races(target, rng):
    x = rng.standard_normal((128, 128)).astype(np.float32)
    y = np.full((128, 128), np.nan, np.float32)
    tegula.compile(epilogue(), target=target)(x, y)
    np.testing.assert_array_equal(y, (2 * x)[:, 127 - np.arange(128)])
    x2 = rng.standard_normal((4, 128)).astype(np.float32)
    y2 = np.full(128, np.nan, np.float32)
    tegula.compile(rotating(), target=target)(x2, y2)
    last = np.empty(128, np.float32)  # after the last iteration, S[(t + 3) % 128] = X[3, t]
    last[(np.arange(128) + 3) % 128] = x2[3]
    np.testing.assert_array_equal(y2, last[127 - np.arange(128)])
