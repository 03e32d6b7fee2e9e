"""Bad NPU kernels get located tegula errors (the user's line, a message, a hint)."""
import numpy as np
import pytest

import tegula
import tegula.language as T
from tegula.errors import KernelTypeError, ResourceError, ScopeError, SyncError


def _line_of(fn, text):
    import inspect

    lines, first = inspect.getsourcelines(fn)
    return first + next(i for i, ln in enumerate(lines) if text in ln)


def test_illegal_copy_path():
    def k(A: T.Tensor((32, 32), "float16")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_L0A((32, 32), "float16")
            with T.Scope("C"):
                T.copy(A, a)  # GM -> L0A
    f = T.prim_func(k)
    for target in ("cpu", "ascend-emu:a2a3"):
        with pytest.raises(ScopeError) as e:
            tegula.compile(f, target=target)(np.zeros((32, 32), np.float16))
        msg = str(e.value)
        assert "from GM to L0A" in msg and "GM -> L1" in msg
        assert f"test_npu_errors.py:{_line_of(k, '# GM -> L0A')}" in msg


def test_ub_to_l1_exists_on_both_but_l0c_to_ub_only_on_a5():
    from tegula.backends.npu.machine import A2A3, A5

    assert A2A3.path("l0c", "ub") is None and A5.path("l0c", "ub").pipe == "FIX"
    assert A2A3.path("ub", "l1") is not None


def test_buffer_over_capacity_names_every_buffer():
    @T.prim_func
    def k(A: T.Tensor((128, 512), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((64, 512), "float32")   # 128 KB
            b = T.alloc_ub((32, 512), "float32")   # 64 KB: 192 KB in all, plus c
            c = T.alloc_ub((1, 8), "float32")
            T.copy(A[vid * 64, 0], a)
            T.copy(a[0:32, :], b)
            T.copy(b[0, 0:8], c)
    with pytest.raises(ResourceError) as e:
        tegula.compile(k, target="ascend-emu:a2a3")
    msg = str(e.value)
    assert "UB overflows on a2a3" in msg and "196640 bytes > 196608" in msg
    assert "a 131072 bytes" in msg and "b 65536 bytes" in msg and "c 32 bytes" in msg
    # the 950's UB (248 KB) holds it
    tegula.compile(k, target="ascend-emu:a5")


def test_misaligned_buffer_is_caught_by_the_emulator():
    from tegula.backends.npu.emu import _memories
    from tegula.backends.npu.machine import A2A3
    from tegula.ir.npu import NpuKernel
    from tegula.ir.visitor import post_order_visit
    from tegula.backends.npu.pipeline import lower
    from tegula.target import Target

    @T.prim_func
    def k(A: T.Tensor((16, 16), "float16")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((16, 16), "float16")
            T.copy(A, a)
    low = lower(k, Target("ascend-emu", "a2a3"), {})
    ks = []
    post_order_visit(low.body, lambda n: ks.append(n) if isinstance(n, NpuKernel) else None)
    kern = ks[0]
    kern.annotations["offsets"][kern.allocs[0]] = 16
    with pytest.raises(ResourceError, match="UB\\+16, not 32-byte aligned"):
        _memories(kern, A2A3, "V")


@pytest.mark.parametrize("target", ["cpu", "ascend-emu"])
def test_flag_id_out_of_range(target):
    def k(A: T.Tensor((16, 16), "float16")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((16, 16), "float16")
            with T.Scope("V"):
                T.copy(A, a)
                T.set_flag("mte2", "v", 8)  # id 8
                T.wait_flag("mte2", "v", 8)
    with pytest.raises(KernelTypeError) as e:
        tegula.compile(T.prim_func(k), target=target)(np.zeros((16, 16), np.float16))
    assert "flag id 8 is out of range 0..7" in str(e.value)
    assert f"test_npu_errors.py:{_line_of(k, '# id 8')}" in str(e.value)


def test_no_such_hard_event():
    def k(A: T.Tensor((16, 16), "float16")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            T.set_flag("v", "v", 0)  # same pipe
    with pytest.raises(KernelTypeError, match="no HardEvent V_V"):
        T.prim_func(k)


def test_cube_op_in_vector_scope():
    def k(A: T.Tensor((32, 32), "float16")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_L1((32, 32), "float16")
            c = T.alloc_L0C((32, 32), "float32")
            with T.Scope("V"):
                T.gemm_v0(a, a, c)  # cube op
    f = T.prim_func(k)
    with pytest.raises(ScopeError) as e:
        tegula.compile(f, target="ascend-emu")
    msg = str(e.value)
    assert 'cube-core operation and cannot run in T.Scope("V")' in msg
    assert f"test_npu_errors.py:{_line_of(k, '# cube op')}" in msg


def test_vector_op_on_cube_memory():
    with pytest.raises(ScopeError, match="vector library works on UB tiles"):
        @T.prim_func
        def k(A: T.Tensor((32, 32), "float16")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                a = T.alloc_L1((32, 32), "float16")
                T.tile.exp(a, a)


def test_bad_scope_and_unknown_tile_op():
    with pytest.raises(KernelTypeError, match='T.Scope takes "C"'):
        @T.prim_func
        def k(A: T.Tensor((32, 32), "float16")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                with T.Scope("X"):
                    pass
    with pytest.raises(KernelTypeError, match="T.tile has no operation 'expp'"):
        @T.prim_func
        def k2(A: T.Tensor((32, 32), "float16")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                a = T.alloc_ub((32, 32), "float16")
                T.tile.expp(a, a)


def test_set_twice_before_wait_is_flag_misuse():
    @T.prim_func
    def k(A: T.Tensor((16, 16), "float16")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((16, 16), "float16")
            with T.Scope("V"):
                T.copy(A, a)
                T.set_flag("mte2", "v", 0)
                T.set_flag("mte2", "v", 0)
                T.wait_flag("mte2", "v", 0)
                T.tile.exp(a, a)
                T.barrier_all()
                T.copy(a, A)
    from tegula.errors import RaceError
    with pytest.raises(RaceError, match="set again at .* before a wait consumed"):
        tegula.compile(k, target="ascend-emu")(np.zeros((16, 16), np.float16))


def test_wait_without_set_deadlocks():
    @T.prim_func
    def k(A: T.Tensor((16, 16), "float16")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((16, 16), "float16")
            with T.Scope("V"):
                T.wait_flag("mte2", "v", 3)
                T.copy(A, a)
    with pytest.raises(SyncError, match="pipe V waits for flag MTE2_V id 3"):
        tegula.compile(k, target="ascend-emu")(np.zeros((16, 16), np.float16))


def test_unknown_ascend_machine():
    from tegula.errors import ConfigError

    @T.prim_func
    def k(A: T.Tensor((16, 16), "float16")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            pass
    with pytest.raises(ConfigError, match="ascend-emu:a2a3 or ascend-emu:a5"):
        tegula.compile(k, target="ascend-emu:a9")
