"""InsertSync and the emulator's checks: inserted flags pair up and suffice, and deleting any
single one of them (or a hand-written one) is caught."""
import numpy as np
import pytest

import tegula
import tegula.language as T
from tegula.errors import RaceError, SyncError
from tegula.ir.npu import SetFlag, SYNC_NODES, WaitFlag
from tegula.ir.stmt import seq
from tegula.ir.visitor import Mutator, post_order_visit
from tegula.target import Target
from tegula.backends.npu.emu import execute
from tegula.backends.npu.machine import machine
from tegula.backends.npu.pipeline import lower

AUTO = {"tl.ascend_auto_sync": True}


def _sync_nodes(func, auto_only):
    found = []
    post_order_visit(func.body, lambda n: found.append(n) if isinstance(n, SYNC_NODES)
                     and (n.auto or not auto_only) else None)
    return found


class _Drop(Mutator):
    def __init__(self, victim):
        super().__init__()
        self.victim = victim

    def visit(self, node):
        if node is self.victim:
            return seq()
        return super().visit(node)


def _gemm_args(rng, M, N, K):
    a = rng.standard_normal((M, K)).astype(np.float16)
    b = rng.standard_normal((K, N)).astype(np.float16)
    return a, b, np.full((M, N), np.nan, np.float16)


def _fa_args(rng, S, D, bm=32, bn=32):
    qkv = [rng.standard_normal((S, D)).astype(np.float16) for _ in range(3)]
    g = S // bm
    return qkv + [np.zeros((g, bm, bn), np.float32), np.zeros((g, bm, bn), np.float16),
                  np.zeros((g, bm, D), np.float32), np.full((S, D), np.nan, np.float16)]


def _run(lowered, args, arch="a2a3", seed=0):
    execute(lowered, args, machine(arch), seed=seed)


@pytest.mark.parametrize("arch", ["a2a3", "a5"])
def test_inserted_flags_pair_up_and_stay_in_range(ascend_example, arch):
    f = ascend_example("gemm").gemm(128, 64, 96)
    low = lower(f, Target("ascend-emu", arch), AUTO)
    nodes = _sync_nodes(low, auto_only=True)
    sets = sorted((n.src, n.dst, int(n.id.value)) for n in nodes if isinstance(n, SetFlag))
    waits = sorted((n.src, n.dst, int(n.id.value)) for n in nodes if isinstance(n, WaitFlag))
    assert sets and sets == waits
    assert all(0 <= i < 8 for _, _, i in sets)
    # the cube pipeline: MTE2 -> MTE1 -> M -> FIX, and the loop-carried reverse edges
    events = {(s, d) for s, d, _ in sets}
    assert {("MTE2", "MTE1"), ("MTE1", "M"), ("M", "FIX"), ("MTE1", "MTE2"), ("M", "MTE1")} <= events


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_inserted_sync_is_race_free_under_several_orders(ascend_example, seed):
    rng = np.random.default_rng()
    f = ascend_example("gemm").gemm(128, 128, 128)
    low = lower(f, Target("ascend-emu", "a2a3"), AUTO)
    a, b, c = _gemm_args(rng, 128, 128, 128)
    _run(low, [a, b, c], seed=seed)
    np.testing.assert_allclose(c.astype(np.float64), a.astype(np.float64) @ b, rtol=2e-3, atol=2e-2)


@pytest.mark.parametrize("example", ["gemm", "gemm_pipelined", "elementwise_add", "softmax",
                                     "flash_attention", "rmsnorm"])
def test_deleting_any_inserted_flag_or_barrier_is_caught(ascend_example, example):
    """The mutation test: every inserted sync node is needed, and the emulator says so."""
    rng = np.random.default_rng()
    ex = ascend_example(example.replace("_pipelined", ""))
    if example.startswith("gemm"):
        f = ex.gemm(64, 64, 128, num_stages=2 if example == "gemm_pipelined" else 1)
        make = lambda: list(_gemm_args(rng, 64, 64, 128))  # noqa: E731
    elif example == "elementwise_add":
        f = ex.elementwise_add(64, 128, hand_sync=False)
        make = lambda: [rng.standard_normal((64, 128)).astype(np.float16) for _ in range(3)]  # noqa: E731
    elif example == "rmsnorm":
        f = ex.rmsnorm(16, 64)
        make = lambda: [rng.standard_normal(s).astype(np.float16) for s in ((16, 64), (1, 64), (16, 64))]  # noqa: E731
    elif example == "flash_attention":
        f = ex.flash_attention(64, 32)
        make = lambda: _fa_args(rng, 64, 32)  # noqa: E731
    else:
        f = ex.softmax(16, 64)
        make = lambda: [rng.standard_normal((16, 64)).astype(np.float16) for _ in range(2)]  # noqa: E731
    low = lower(f, Target("ascend-emu", "a2a3"), AUTO)
    nodes = _sync_nodes(low, auto_only=True)
    assert nodes
    _run(low, make())  # intact: no report
    for victim in nodes:
        mutant = low.with_body(_Drop(victim).visit(low.body))
        with pytest.raises((RaceError, SyncError)) as e:
            _run(mutant, make())
        msg = str(e.value)
        assert "race" in msg or "deadlock" in msg or "flag misuse" in msg, (victim, msg)


def test_deleting_a_hand_written_flag_is_caught(ascend_example):
    rng = np.random.default_rng()
    f = ascend_example("elementwise_add").elementwise_add(64, 128)
    low = lower(f, Target("ascend-emu", "a2a3"), {})
    nodes = _sync_nodes(low, auto_only=False)
    assert len(nodes) >= 10
    for victim in nodes:
        mutant = low.with_body(_Drop(victim).visit(low.body))
        with pytest.raises((RaceError, SyncError)):
            _run(mutant, [rng.standard_normal((64, 128)).astype(np.float16) for _ in range(3)])


def test_hand_written_flags_are_kept_not_duplicated(ascend_example):
    f = ascend_example("elementwise_add").elementwise_add(64, 128)
    hand = _sync_nodes(lower(f, Target("ascend-emu", "a2a3"), {}), auto_only=False)
    both = lower(f, Target("ascend-emu", "a2a3"), AUTO)
    assert len([n for n in _sync_nodes(both, auto_only=False) if not n.auto]) == len(hand)
    assert not [n for n in _sync_nodes(both, auto_only=True) if isinstance(n, (SetFlag, WaitFlag))]


def test_race_report_names_buffer_bytes_pipes_and_lines():
    @T.prim_func
    def k(A: T.Tensor((16, 32), "float16"), B: T.Tensor((16, 32), "float16")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_ub((8, 32), "float16")
            with T.Scope("V"):
                T.copy(A[vid * 8, 0], x)
                T.tile.exp(x, x)
                T.copy(x, B[vid * 8, 0])
    kern = tegula.compile(k, target="ascend-emu")
    a = np.random.default_rng().standard_normal((16, 32)).astype(np.float16)
    with pytest.raises(RaceError) as e:
        kern(a, np.zeros_like(a))
    msg = str(e.value)
    assert "UB buffer 'x' bytes [0, 512)" in msg
    assert "MTE2 writes at" in msg and "V reads at" in msg and "test_npu_sync.py:" in msg
    # with the flags inserted the same kernel is right
    b = np.zeros_like(a)
    tegula.compile(k, target="ascend-emu", pass_configs=AUTO)(a, b)
    np.testing.assert_allclose(b.astype(np.float64), np.exp(a.astype(np.float64)), rtol=2e-3)


def _cross_core(with_wait=True, with_set=True):
    """AIC: C = A @ B into a GM workspace, then a cross-core flag; AIVs: relu of their half."""
    @T.prim_func
    def k(A: T.Tensor((32, 32), "float16"), B: T.Tensor((32, 32), "float16"),
          W: T.Tensor((32, 32), "float16"), C: T.Tensor((32, 32), "float16")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a_l1 = T.alloc_L1((32, 32), "float16")
            b_l1 = T.alloc_L1((32, 32), "float16")
            c_l0 = T.alloc_L0C((32, 32), "float32")
            x = T.alloc_ub((16, 32), "float16")
            with T.Scope("C"):
                T.copy(A, a_l1)
                T.copy(B, b_l1)
                T.gemm_v0(a_l1, b_l1, c_l0, init=True)
                T.copy(c_l0, W)
                if with_set:
                    T.set_cross_flag("fix", 0)
            with T.Scope("V"):
                if with_wait:
                    T.wait_cross_flag(0)
                T.copy(W[vid * 16, 0], x)
                T.tile.relu(x, x)
                T.copy(x, C[vid * 16, 0])
    return k


@pytest.mark.parametrize("target", ["cpu", "ascend-emu:a2a3", "ascend-emu:a5"])
def test_cross_core_hand_off(target):
    rng = np.random.default_rng()
    a = rng.standard_normal((32, 32)).astype(np.float16)
    b = rng.standard_normal((32, 32)).astype(np.float16)
    w, c = np.zeros_like(a), np.full_like(a, np.nan)
    tegula.compile(_cross_core(), target=target, pass_configs=AUTO)(a, b, w, c)
    ref = np.maximum(a.astype(np.float64) @ b, 0)
    np.testing.assert_allclose(c.astype(np.float64), ref, rtol=2e-3, atol=2e-2)


def test_missing_cross_core_wait_is_a_race_between_cores():
    rng = np.random.default_rng()
    a, b = (rng.standard_normal((32, 32)).astype(np.float16) for _ in range(2))
    with pytest.raises(RaceError) as e:
        tegula.compile(_cross_core(with_wait=False), target="ascend-emu", pass_configs=AUTO)(
            a, b, np.zeros_like(a), np.zeros_like(a))
    msg = str(e.value)
    assert "GM buffer 'W'" in msg and "AIC FIX writes" in msg and "MTE2 reads" in msg


@pytest.mark.parametrize("target", ["cpu", "ascend-emu"])
def test_missing_cross_core_set_is_a_deadlock(target):
    a = np.random.default_rng().standard_normal((32, 32)).astype(np.float16)
    with pytest.raises(SyncError, match="deadlock.*cross-core flag 0.*test_npu_sync.py"):
        tegula.compile(_cross_core(with_set=False), target=target, pass_configs=AUTO)(
            a, a, np.zeros_like(a), np.zeros_like(a))


def test_pipelined_loop_gets_ring_flags_one_per_version(ascend_example):
    from tegula.ir.stmt import For

    f = ascend_example("gemm").gemm(64, 64, 128, num_stages=3)
    low = lower(f, Target("ascend-emu", "a2a3"), AUTO)
    loops = []
    post_order_visit(low.body, lambda n: loops.append(n) if isinstance(n, For) else None)
    (loop,) = [x for x in loops if x.kind == "pipelined"]
    # the tiles loaded from GM get num_stages versions; AutoSchedule picks the L0 buffers' count
    assert {b: n for b, n in loop.annotations["versions"].items() if b.endswith("L1")} == \
        {"A_L1": 3, "B_L1": 3}
    nodes = _sync_nodes(low, auto_only=True)
    pre = sorted(int(n.id.value) for n in nodes if isinstance(n, SetFlag) and n.src == "MTE1"
                 and n.dst == "MTE2" and hasattr(n.id, "value"))
    assert pre == [0, 1, 2]  # pre-armed, one per version; drained the same way
    ring = [n for n in nodes if isinstance(n, WaitFlag) and (n.src, n.dst) == ("MTE1", "MTE2")
            and not hasattr(n.id, "value")]
    assert len(ring) == 1 and "k % 3" in str(ring[0].id)


def test_deleting_a_cross_core_flag_of_flash_attention_is_caught(ascend_example):
    from tegula.ir.npu import SetCrossFlag, WaitCrossFlag

    rng = np.random.default_rng()
    low = lower(ascend_example("flash_attention").flash_attention(64, 32), Target("ascend-emu", "a2a3"), AUTO)
    cross = [n for n in _sync_nodes(low, auto_only=False) if isinstance(n, (SetCrossFlag, WaitCrossFlag))]
    assert len(cross) == 6
    for victim in cross:
        with pytest.raises((RaceError, SyncError)):
            _run(low.with_body(_Drop(victim).visit(low.body)), _fa_args(rng, 64, 32))


@T.prim_func
def halves(A: T.Tensor((32, 32), "float32"), B: T.Tensor((32, 32), "float32")):
    with T.Kernel(1, is_npu=True) as (cid, vid):
        x = T.alloc_ub((16, 32), "float32")
        with T.Scope("V"):
            T.copy(A[vid * 16, 0], x[0:8, :])
            T.tile.exp(x[0:8, :], x[0:8, :])
            T.copy(A[vid * 16 + 8, 0], x[8:16, :])     # the other half: no V -> MTE2 flag
            T.tile.exp(x[8:16, :], x[8:16, :])
            T.copy(x, B[vid * 16, 0])


def test_disjoint_regions_of_one_buffer_need_no_flag():
    rng = np.random.default_rng()
    low = lower(halves, Target("ascend-emu", "a2a3"), AUTO)
    events = [(n.src, n.dst) for n in _sync_nodes(low, auto_only=True) if isinstance(n, SetFlag)]
    assert ("V", "MTE2") not in events          # the exp of the top half and the load of the bottom
    assert events.count(("MTE2", "V")) == 2 and ("V", "MTE3") in events
    for seed in range(4):
        a = rng.standard_normal((32, 32)).astype(np.float32)
        b = np.full((32, 32), np.nan, np.float32)
        _run(low, [a, b], seed=seed)
        np.testing.assert_allclose(b, np.exp(a.astype(np.float64)), rtol=1e-5)
    for victim in _sync_nodes(low, auto_only=True):   # and each flag left is needed
        with pytest.raises((RaceError, SyncError)):
            _run(low.with_body(_Drop(victim).visit(low.body)),
                 [rng.standard_normal((32, 32)).astype(np.float32), np.zeros((32, 32), np.float32)])


def test_overlapping_regions_still_get_their_flag():
    @T.prim_func
    def k(A: T.Tensor((16, 32), "float32"), B: T.Tensor((16, 32), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            x = T.alloc_ub((16, 32), "float32")
            with T.Scope("V"):
                T.copy(A[0, 0], x[0:12, :])
                T.tile.exp(x[0:8, :], x[0:8, :])
                T.copy(A[4, 0], x[4:16, :])              # overlaps rows 4-7 the exp used
                T.copy(x, B[0, 0])
    low = lower(k, Target("ascend-emu", "a2a3"), AUTO)
    events = [(n.src, n.dst) for n in _sync_nodes(low, auto_only=True) if isinstance(n, SetFlag)]
    assert ("V", "MTE2") in events


def test_flags_inside_a_double_buffered_loop_are_rings_too(ascend_example):
    """Iteration k+1 may load (MTE2) while MTE1 still works on k: the MTE2 -> MTE1 flags set in
    the body get one id per version, so a set never lands on a flag whose wait is pending."""
    f = ascend_example("gemm").gemm(64, 64, 128, num_stages=2)
    low = lower(f, Target("ascend-emu", "a2a3"), AUTO)
    nodes = _sync_nodes(low, auto_only=True)
    inner = [n for n in nodes if isinstance(n, SetFlag) and (n.src, n.dst) == ("MTE2", "MTE1")]
    assert inner and all("k % 2" in str(n.id) for n in inner)
    ids = {str(n.id) for n in inner}
    assert len(ids) == len(inner)                       # each load its own ring
    # and no flag from MTE1 back to MTE2 per iteration, which would undo the double buffering
    assert not [n for n in nodes if isinstance(n, WaitFlag) and (n.src, n.dst) == ("MTE1", "MTE2")
                and hasattr(n.id, "value") and "k" not in str(n.id) and n in _loop_nodes(low)]


def _loop_nodes(low):
    from tegula.ir.stmt import For

    out = []
    post_order_visit(low.body, lambda n: out.extend(_sync_nodes_in(n.body)) if isinstance(n, For)
                     and n.kind == "pipelined" else None)
    return out


def _sync_nodes_in(s):
    found = []
    post_order_visit(s, lambda n: found.append(n) if isinstance(n, SYNC_NODES) else None)
    return found
