"""The Ascend emulator is as strict as the hardware, no stricter: two vector cores writing the
same values to the same GM bytes is allowed (strict mode reports it); different values are a race."""
import numpy as np
import pytest

import tegula
import tegula.language as T
from tegula.errors import RaceError

torch = pytest.importorskip("torch")


def both_cores_write(scale_by_vid: bool):
    @T.prim_func
    def main(A: T.Tensor((32, 64), "float32"), B: T.Tensor((32, 64), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((32, 64), "float32")
            with T.Scope("V"):
                T.copy(A, a)
                T.tile.exp(a, a)
                if scale_by_vid:
                    T.tile.mul(a, a, T.cast(vid + 1, "float32"))
                T.copy(a, B)  # both vector cores write all of B
    return main


@pytest.mark.parametrize("arch", ["a2a3", "a5"])
def test_identical_writes_from_both_vector_cores_are_allowed(arch):
    A = torch.randn(32, 64)
    B = torch.full((32, 64), float("nan"))
    tegula.compile(both_cores_write(False), target=f"ascend-emu:{arch}",
                   pass_configs={"tl.ascend_auto_sync": True})(A, B)
    np.testing.assert_allclose(B.double().numpy(), np.exp(A.double().numpy()), rtol=1e-5)


def test_strict_mode_reports_identical_writes():
    A = torch.randn(32, 64)
    B = torch.empty(32, 64)
    k = tegula.compile(both_cores_write(False), target="ascend-emu:a2a3",
                       pass_configs={"tl.ascend_auto_sync": True, "tegula.npu_emu_strict": True})
    with pytest.raises(RaceError, match="write after write.*'B'"):
        k(A, B)


def test_different_values_from_both_vector_cores_are_a_race():
    A = torch.randn(32, 64)
    B = torch.empty(32, 64)
    k = tegula.compile(both_cores_write(True), target="ascend-emu:a2a3",
                       pass_configs={"tl.ascend_auto_sync": True})
    with pytest.raises(RaceError, match="write after write.*'B'.*AIV"):
        k(A, B)


def one_stage_parallel():
    @T.prim_func
    def main(A: T.Tensor((32, 64), "float32"), B: T.Tensor((32, 64), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            u = T.alloc_ub((2, 16, 64), "float32")
            v = T.alloc_ub((16, 64), "float32")
            with T.Scope("V"):
                T.copy(A[0:16, :], u[0, :, :])
                T.set_flag("mte2", "v", 0)
                T.wait_flag("mte2", "v", 0)
                T.copy(A[16:32, :], u[1, :, :])  # MTE2 fills stage 1 while V reads stage 0
                for i, j in T.Parallel(16, 64):
                    v[i, j] = u[0, i, 63 - j] * 2
                T.set_flag("v", "mte3", 0)
                T.wait_flag("v", "mte3", 0)
                T.copy(v, B[0:16, :])
                T.set_flag("mte2", "mte3", 0)
                T.wait_flag("mte2", "mte3", 0)
                T.copy(u[1, :, :], B[16:32, :])
    return main


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_parallel_footprint_is_the_region_it_touches(seed):
    A = torch.randn(32, 64)
    B = torch.full((32, 64), float("nan"))
    tegula.compile(one_stage_parallel(), target="ascend-emu:a2a3",
                   pass_configs={"tegula.npu_emu_seed": seed})(A, B)
    a = A.double().numpy()
    np.testing.assert_allclose(B.double().numpy(), np.concatenate([a[:16, ::-1] * 2, a[16:]]), rtol=1e-6)


def scalar_unit_kernel():
    @T.prim_func
    def main(A: T.Tensor((2, 64), "float32"), B: T.Tensor((2, 8), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((1, 64), "float32")
            b = T.alloc_ub((8,), "float32")
            with T.Scope("V"):
                T.copy(A[vid, 0], a)
                T.barrier_all()
                for j in T.serial(8):
                    x = a[0, j * 8]      # the scalar unit reads a UB element
                    b[j] = x * 2.0 + 1.0  # and writes one
                T.copy(b, B[vid, 0])
    return main


@pytest.mark.parametrize("target", ["cpu", "ascend-emu:a2a3", "ascend-emu:a5"])
def test_scalar_loads_and_stores_of_ub_elements(target):
    A = torch.randn(2, 64)
    B = torch.full((2, 8), float("nan"))
    tegula.compile(scalar_unit_kernel(), target=target)(A, B)
    np.testing.assert_allclose(B.double().numpy(), A.double().numpy()[:, ::8] * 2 + 1, rtol=1e-6)


def test_a_scalar_load_deciding_a_loop_is_a_located_error():
    from tegula.errors import UnsupportedError

    @T.prim_func
    def main(A: T.Tensor((64,), "int32"), B: T.Tensor((64,), "int32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((64,), "int32")
            with T.Scope("V"):
                T.copy(A, a)
                T.barrier_all()
                n = a[0]
                for j in T.serial(n):
                    a[j] = 0
                T.copy(a, B)
    A = torch.zeros(64, dtype=torch.int32)
    B = torch.zeros(64, dtype=torch.int32)
    with pytest.raises(UnsupportedError, match="'n' holds an element the scalar unit reads from on-chip tile 'a'") as e:
        tegula.compile(main, target="ascend-emu:a2a3")(A, B)
    assert "test_npu_emu_strictness.py" in str(e.value) and "for j in T.serial(n)" in str(e.value)


def ub_float_to_int():
    @T.prim_func
    def main(A: T.Tensor((2, 16), "float32"), B: T.Tensor((2, 16), "int32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((1, 16), "float32")
            b = T.alloc_ub((1, 16), "int32")
            with T.Scope("V"):
                T.copy(A[vid, 0], a)
                T.copy(a, b)  # UB -> UB conversion: the vector unit's Cast, CAST_RINT
                T.copy(b, B[vid, 0])
    return main


@pytest.mark.parametrize("target", ["cpu", "ascend-emu:a2a3", "ascend-emu:a5"])
def test_ub_float_to_int_copy_rounds_to_nearest_even(target):
    halves = torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 1.7, -1.7])
    A = torch.cat([halves, torch.randn(8) * 100]).repeat(2, 1)
    B = torch.zeros(2, 16, dtype=torch.int32)
    tegula.compile(ub_float_to_int(), target=target, pass_configs={"tl.ascend_auto_sync": True})(A, B)
    np.testing.assert_array_equal(B.numpy(), np.rint(A.double().numpy()).astype(np.int32))
    assert B[0, :6].tolist() == [0, 2, 2, 0, -2, -2]


def test_a_condition_on_tile_data_is_a_located_error_not_a_crash():
    from tegula.errors import UnsupportedError

    @T.prim_func
    def main(A: T.Tensor((64,), "int32"), B: T.Tensor((64,), "int32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((64,), "int32")
            with T.Scope("V"):
                T.copy(A, a)
                T.barrier_all()
                for j in T.serial(64):
                    if a[j] > 0:
                        a[j] = 0
                T.barrier_all()
                T.copy(a, B)
    A = torch.randint(-3, 3, (64,), dtype=torch.int32)
    B = torch.zeros(64, dtype=torch.int32)
    tegula.compile(main, target="cpu")(A, B)  # the interpreter runs it
    np.testing.assert_array_equal(B.numpy(), np.minimum(A.numpy(), 0))
    with pytest.raises(UnsupportedError, match="reads an element of on-chip tile 'a' to decide") as e:
        tegula.compile(main, target="ascend-emu:a2a3")(A, B)
    assert "if a[j] > 0" in str(e.value)


def scalar_prefix_sum():
    @T.prim_func
    def main(G: T.Tensor((64,), "float32"), S: T.Tensor((64,), "float32")):
        with T.Kernel(2, is_npu=True) as (cid, vid):
            g = T.alloc_shared([1, 32], "float32")
            s = T.alloc_shared([1, 32], "float32")
            T.copy(G[cid * 32], g[0, :])
            T.tile.fill(s, 0.0)
            for i in range(32):  # the scalar unit, between MTE2 / V and MTE3
                if i > 0:
                    s[0, i] = s[0, i - 1]
                s[0, i] = s[0, i] + g[0, i]
            T.copy(s[0, :], S[cid * 32])
    return main


@pytest.mark.parametrize("target", ["cpu", "ascend-emu:a2a3", "ascend-emu:a5"])
def test_insert_sync_orders_the_scalar_units_ub_accesses(target):
    G = torch.randn(64)
    S = torch.full((64,), float("nan"))
    tegula.compile(scalar_prefix_sum(), target=target, pass_configs={"tl.ascend_auto_sync": True})(G, S)
    g = G.double().numpy().reshape(2, 32)
    np.testing.assert_allclose(S.double().numpy(), np.cumsum(g, axis=1).reshape(-1), rtol=1e-5, atol=1e-5)
