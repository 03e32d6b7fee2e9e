"""Golden before/after tests of the NPU passes, and the fractal layouts."""
import numpy as np
import pytest

import tegula.language as T
from tegula.backends.npu.layout import Fractal
from tegula.backends.npu.machine import A2A3
from tegula.backends.npu.passes.infer_core_scope import infer_core_scope
from tegula.backends.npu.passes.infer_fractal_layout import infer_fractal_layout, layout_for
from tegula.backends.npu.passes.insert_sync import insert_sync
from tegula.backends.npu.passes.lower_gemm_v0 import lower_gemm_v0
from tegula.backends.npu.passes.plan_memory import plan_npu_memory


def _body(func):
    """The printed kernel body (everything under the T.Kernel line), dedented."""
    lines = func.script().splitlines()
    i = next(n for n, ln in enumerate(lines) if "T.Kernel" in ln)
    return "\n".join(ln[8:] for ln in lines[i + 1:])


@T.prim_func
def vec_kernel(A: T.Tensor((16, 32), "float16"), B: T.Tensor((16, 32), "float16")):
    with T.Kernel(1, is_npu=True) as (cid, vid):
        x = T.alloc_ub((8, 32), "float16")
        y = T.alloc_ub((8, 32), "float16")
        T.copy(A[vid * 8, 0], x)
        T.tile.exp(y, x)
        T.copy(y, B[vid * 8, 0])


def test_infer_core_scope_golden():
    assert _body(infer_core_scope(vec_kernel)) == """\
x = T.alloc_ub((8, 32), "float16")
y = T.alloc_ub((8, 32), "float16")
# annotation dialect = "a2a3"
with T.Scope("V"):
    T.copy(A[vid * 8:vid * 8 + 8, :], x)
    T.tile.exp(y, x)
    T.copy(y, B[vid * 8:vid * 8 + 8, :])"""


def test_insert_sync_golden():
    f = insert_sync(infer_core_scope(vec_kernel), A2A3)
    assert _body(f).split("with T.Scope(\"V\"):\n", 1)[1] == """\
    T.copy(A[vid * 8:vid * 8 + 8, :], x)
    T.set_flag("mte2", "v", 0)  # inserted
    T.wait_flag("mte2", "v", 0)  # inserted
    T.tile.exp(y, x)
    T.set_flag("v", "mte3", 0)  # inserted
    T.wait_flag("v", "mte3", 0)  # inserted
    T.copy(y, B[vid * 8:vid * 8 + 8, :])"""


@T.prim_func
def cube_kernel(A: T.Tensor((30, 64), "float16"), B: T.Tensor((64, 32), "float16"),
                C: T.Tensor((30, 32), "float32")):
    with T.Kernel(1, is_npu=True) as (cid, vid):
        a = T.alloc_L1((30, 64), "float16")
        b = T.alloc_L1((64, 32), "float16")
        c = T.alloc_L0C((30, 32), "float32")
        T.copy(A, a)
        T.copy(B, b)
        T.gemm_v0(a, b, c, init=True)
        T.copy(c, C)


def test_lower_gemm_v0_layouts_and_plan_golden():
    f = plan_npu_memory(infer_fractal_layout(lower_gemm_v0(infer_core_scope(cube_kernel), auto_sync=True)), A2A3)
    assert _body(f) == """\
a = T.alloc_L1((30, 64), "float16")
b = T.alloc_L1((64, 32), "float16")
c = T.alloc_L0C((30, 32), "float32")
a_l0a = T.alloc_L0A((30, 64), "float16")
b_l0b = T.alloc_L0B((64, 32), "float16")
# a: layouts=NZ(16x16), offsets=0
# b: layouts=NZ(16x16), offsets=4096
# c: layouts=NZ(16x16), offsets=0
# a_l0a: layouts=ZZ(16x16), offsets=0
# b_l0b: layouts=ZN(16x16), offsets=0
# annotation dialect = "a2a3"
# annotation machine = "a2a3"
with T.Scope("C"):
    T.copy(A, a)
    T.copy(B, b)
    T.copy(a, a_l0a)
    T.copy(b, b_l0b)
    T.mma(a_l0a, b_l0b, c, init=True)
    T.copy(c, C)"""


def test_nz_index_map_is_the_k_major_fractal_order():
    # [col / C0, row / 16, row % 16, col % C0] for fp16 (C0 = 16), rows padded 30 -> 32
    lay = layout_for("l1", 2)
    imap = lay.index_map((30, 64))
    r, c = np.meshgrid(np.arange(30), np.arange(64), indexing="ij")
    want = ((c // 16) * 2 + r // 16) * 256 + (r % 16) * 16 + c % 16
    np.testing.assert_array_equal(imap, want)
    assert lay.padded((30, 64)) == (32, 64)


@pytest.mark.parametrize("itemsize, c0", [(1, 32), (2, 16), (4, 8)])
def test_fractals_are_16_by_c0(itemsize, c0):
    assert layout_for("l0a", itemsize) == Fractal("ZZ", 16, c0)
    assert layout_for("l0c", 4) == Fractal("NZ", 16, 16)


def test_zn_stores_each_fractal_column_major():
    imap = Fractal("ZN", 16, 16).index_map((32, 32))
    assert imap[1, 0] == 1 and imap[0, 1] == 16 and imap[0, 16] == 256 and imap[16, 0] == 512


def test_the_npu_pipeline_is_traceable_pass_by_pass():
    from tegula.tools.trace import trace

    tr = trace(vec_kernel, target="ascend-emu:a5", pass_configs={"tl.ascend_auto_sync": True})
    assert tr.names()[1:] == ["AssignNpuScopes", "InferCoreScope", "CheckNpuOps", "LowerGemmV0", "AutoSchedule", "MultiBuffer",
                              "InferFractalLayout", "PlanNpuMemory", "InsertSync", "ParallelToVec"]
    assert tr.error is None and not tr.problems
    assert "# inserted" in tr["InsertSync"].ir and "# inserted" not in tr["PlanNpuMemory"].ir
