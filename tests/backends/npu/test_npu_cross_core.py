"""InsertSync's cross-core flags: hand-offs through GM between the cube and the vector cores."""
import numpy as np
import pytest

import tegula
import tegula.language as T
from tegula.errors import RaceError, SyncError
from tegula.ir.npu import SetCrossFlag, WaitCrossFlag
from tegula.ir.visitor import post_order_visit
from tegula.target import Target
from tegula.backends.npu.emu import execute
from tegula.backends.npu.machine import machine
from tegula.backends.npu.pipeline import lower

from test_npu_sync import _Drop, _sync_nodes

AUTO = {"tl.ascend_auto_sync": True}


def scale_gemm_relu():
    """V scales A into W1, C multiplies W1 @ B into W2, V applies ReLU: two hand-offs."""
    @T.prim_func
    def k(A: T.Tensor((32, 16), "float16"), B: T.Tensor((16, 32), "float16"),
          W1: T.Tensor((32, 16), "float16"), W2: T.Tensor((32, 32), "float32"),
          C: T.Tensor((32, 32), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            xa = T.alloc_ub((16, 16), "float16")
            a = T.alloc_L1((32, 16), "float16")
            b = T.alloc_L1((16, 32), "float16")
            acc = T.alloc_L0C((32, 32), "float32")
            x = T.alloc_ub((16, 32), "float32")
            with T.Scope("V"):
                T.copy(A[vid * 16, 0], xa)
                T.tile.mul(xa, xa, 0.5)
                T.copy(xa, W1[vid * 16, 0])
            with T.Scope("C"):
                T.copy(W1[0, 0], a)
                T.copy(B[0, 0], b)
                T.gemm_v0(a, b, acc, init=True)
                T.copy(acc, W2[0, 0])
            with T.Scope("V"):
                T.copy(W2[vid * 16, 0], x)
                T.tile.relu(x, x)
                T.copy(x, C[vid * 16, 0])
    return k


def _args(rng):
    a = rng.standard_normal((32, 16)).astype(np.float16)
    b = rng.standard_normal((16, 32)).astype(np.float16)
    return [a, b, np.zeros((32, 16), np.float16), np.zeros((32, 32), np.float32),
            np.full((32, 32), np.nan, np.float32)]


def _ref(a, b):
    return np.maximum((a.astype(np.float64) * 0.5) @ b.astype(np.float64), 0)


@pytest.mark.parametrize("target", ["cpu", "ascend-emu:a2a3", "ascend-emu:a5"])
def test_two_hand_offs_get_their_flags(target):
    rng = np.random.default_rng()
    args = _args(rng)
    tegula.compile(scale_gemm_relu(), target=target, pass_configs=AUTO)(*args)
    np.testing.assert_allclose(args[-1], _ref(args[0], args[1]), rtol=2e-3, atol=2e-3)


def test_flags_point_from_the_earlier_scope_to_the_later_one():
    low = lower(scale_gemm_relu(), Target("ascend-emu", "a2a3"), AUTO)
    sets = [n for n in _sync_nodes(low, True) if isinstance(n, SetCrossFlag)]
    waits = [n for n in _sync_nodes(low, True) if isinstance(n, WaitCrossFlag)]
    assert sorted((n.pipe, int(n.flag.value)) for n in sets) == [("FIX", 1), ("MTE3", 0)]
    assert sorted(int(n.flag.value) for n in waits) == [0, 1]
    assert all(n.mode == 2 for n in sets)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_deleting_any_inserted_flag_is_caught(seed):
    rng = np.random.default_rng()
    low = lower(scale_gemm_relu(), Target("ascend-emu", "a2a3"), AUTO)
    execute(low, _args(rng), machine("a2a3"), seed=seed)
    nodes = _sync_nodes(low, auto_only=True)
    assert any(isinstance(n, (SetCrossFlag, WaitCrossFlag)) for n in nodes)
    for victim in nodes:
        with pytest.raises((RaceError, SyncError)):
            execute(low.with_body(_Drop(victim).visit(low.body)), _args(rng), machine("a2a3"), seed=seed)


def test_the_950_quick_start_without_its_flag(ascend_example):
    """gemm_relu_950 with its hand-written cross-core flag removed gets it back from InsertSync."""
    rng = np.random.default_rng()
    ex = ascend_example("gemm_relu_950")
    f = ex.gemm_relu(128, 128, 128)

    class _NoCross(_Drop):
        def visit(self, node):
            if isinstance(node, (SetCrossFlag, WaitCrossFlag)):
                return __import__("tegula.ir.stmt", fromlist=["seq"]).seq()
            return super().visit(node)
    bare = f.with_body(_NoCross(None).visit(f.body))
    for arch in ("a2a3", "a5"):
        low = lower(bare, Target("ascend-emu", arch), AUTO)
        assert len([n for n in _sync_nodes(low, True) if isinstance(n, SetCrossFlag)]) == 1
        a = rng.standard_normal((128, 128)).astype(np.float16)
        b = rng.standard_normal((128, 128)).astype(np.float16)
        w = np.zeros((128, 128), np.float32)
        c = np.full((128, 128), np.nan, np.float32)
        execute(low, [a, b, w, c], machine(arch))
        np.testing.assert_allclose(c, ex.reference(a, b), rtol=2e-3, atol=2e-2)


@pytest.mark.parametrize("name", ["flash_attention", "gemm_relu_950"])
def test_hand_written_cross_core_flags_are_kept_alone(ascend_example, name):
    ex = ascend_example(name)
    f = ex.flash_attention(64, 32) if name == "flash_attention" else ex.gemm_relu(128, 128, 128)
    low = lower(f, Target("ascend-emu", "a2a3"), AUTO)
    cross = []
    post_order_visit(low.body, lambda n: cross.append(n) if isinstance(n, (SetCrossFlag, WaitCrossFlag)) else None)
    assert cross and not [n for n in cross if n.auto]
