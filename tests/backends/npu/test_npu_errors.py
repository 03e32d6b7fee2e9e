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


def _placed(where):
    def k(A: T.Tensor((16, 16), "float16"), B: T.Tensor((16, 16), "float16")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((8, 16), "float16")
            T.annotate_address({a: where})  # placed
            with T.Scope("V"):
                T.copy(A[vid * 8, 0], a)
                T.tile.exp(a, a)
                T.copy(a, B[vid * 8, 0])
    return k


def test_annotate_address_places_the_buffer():
    from tegula.backends.npu.pipeline import lower
    from tegula.ir.npu import NpuKernel
    from tegula.ir.visitor import post_order_visit
    from tegula.target import Target

    f = T.prim_func(_placed(4096))
    low = lower(f, Target("ascend-emu", "a2a3"), {"tl.ascend_auto_sync": True})
    ks = []
    post_order_visit(low.body, lambda n: ks.append(n) if isinstance(n, NpuKernel) else None)
    assert list(ks[0].annotations["offsets"].values()) == [4096]
    a = np.random.default_rng().standard_normal((16, 16)).astype(np.float16)
    b = np.full((16, 16), np.nan, np.float16)
    tegula.compile(f, target="ascend-emu:a2a3", pass_configs={"tl.ascend_auto_sync": True})(a, b)
    np.testing.assert_allclose(b.astype(np.float64), np.exp(a.astype(np.float64)), rtol=2e-3)


def test_misaligned_address_is_an_error_at_its_line():
    k = _placed(48)
    with pytest.raises(ResourceError) as e:
        tegula.compile(T.prim_func(k), target="ascend-emu:a2a3")
    msg = str(e.value)
    assert "puts 'a' at UB+48, not 32-byte aligned" in msg and "multiple of 32" in msg
    assert f"test_npu_errors.py:{_line_of(k, '# placed')}" in msg


def test_address_past_the_capacity_is_an_error_at_its_line():
    k = _placed(192 * 1024 - 128)
    with pytest.raises(ResourceError) as e:
        tegula.compile(T.prim_func(k), target="ascend-emu:a2a3")
    assert "256 bytes end at 196736 > 196608" in str(e.value)
    assert f"test_npu_errors.py:{_line_of(k, '# placed')}" in str(e.value)
    tegula.compile(T.prim_func(k), target="ascend-emu:a5")   # the 950's UB is larger


def test_annotate_address_takes_npu_buffers_and_int_offsets():
    def k(A: T.Tensor((16, 16), "float16")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((16, 16), "float16")
            T.annotate_address({a: 1.5})
    with pytest.raises(KernelTypeError, match="offset of 'a' must be a non-negative Python int"):
        T.prim_func(k)


def _alternating(tmp_path, n):
    """A kernel of n scopes, cube and vector in turn, each handing W[i] to the next."""
    import importlib.util

    body = []
    for i in range(n):
        if i % 2 == 0:
            body += ['            with T.Scope("C"):',
                     f"                T.copy(X[{i - 1}, 0, 0], a)" if i else "                T.copy(A, a)",
                     "                T.gemm_v0(a, a, c, init=True)",
                     f"                T.copy(c, W[{i}, 0, 0])"]
        else:
            body += ['            with T.Scope("V"):',
                     f"                T.copy(W[{i - 1}, vid * 16, 0], x)",
                     "                T.tile.cast(x16, x)",
                     f"                T.copy(x16, X[{i}, vid * 16, 0])"]
    src = "\n".join([
        "import tegula.language as T", "", "",
        "@T.prim_func",
        f'def k(A: T.Tensor((32, 32), "float16"), W: T.Tensor(({n}, 32, 32), "float32"),',
        f'      X: T.Tensor(({n + 1}, 32, 32), "float16")):',
        "        with T.Kernel(1, is_npu=True) as (cid, vid):",
        '            a = T.alloc_L1((32, 32), "float16")',
        '            c = T.alloc_L0C((32, 32), "float32")',
        '            x = T.alloc_ub((16, 32), "float32")',
        '            x16 = T.alloc_ub((16, 32), "float16")'] + body) + "\n"
    path = tmp_path / f"alternating{n}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.k


def test_automatic_cross_core_flags_follow_the_chain(tmp_path):
    from tegula.backends.npu.pipeline import lower
    from tegula.ir.npu import SetCrossFlag
    from tegula.ir.visitor import post_order_visit
    from tegula.target import Target

    low = lower(_alternating(tmp_path, 6), Target("ascend-emu", "a2a3"), {"tl.ascend_auto_sync": True})
    sets = []
    post_order_visit(low.body, lambda n: sets.append(n) if isinstance(n, SetCrossFlag) else None)
    assert len(sets) == 5          # one per hand-off, none for what the chain implies
    rng = np.random.default_rng()
    a = (rng.standard_normal((32, 32)) / 4).astype(np.float16)
    outs = []
    for target in ("cpu", "ascend-emu:a2a3"):      # race-free, and the same as the interpreter
        w, x = np.zeros((6, 32, 32), np.float32), np.zeros((7, 32, 32), np.float16)
        tegula.compile(_alternating(tmp_path, 6), target=target, pass_configs={"tl.ascend_auto_sync": True})(a, w, x)
        outs.append(x[5])
    ref = a.astype(np.float64)
    for _ in range(3):
        ref = ref @ ref
    np.testing.assert_allclose(outs[0].astype(np.float64), ref, rtol=2e-2, atol=2e-2)
    np.testing.assert_array_equal(outs[0], outs[1])


def test_too_many_automatic_cross_core_flags(tmp_path):
    f = _alternating(tmp_path, 13)
    with pytest.raises(ResourceError) as e:
        tegula.compile(f, target="ascend-emu:a2a3", pass_configs={"tl.ascend_auto_sync": True})
    assert "need 12 cross-core flags; a2a3 has 11" in str(e.value)
    assert "alternating13.py:" in str(e.value)
    tegula.compile(f, target="ascend-emu:a5", pass_configs={"tl.ascend_auto_sync": True})  # 16 ids
