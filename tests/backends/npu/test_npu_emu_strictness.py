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
