"""The Ascend 950 dialect: T.Kernel(num_blocks) as bx, T.Cube / T.Vector, alloc_l1..l0c,
alloc_shared as UB, T.gemm on L1 operands, T.ascend_* sync, T.SimtVF / T.Task / T.Stage."""
import numpy as np
import pytest

import tegula
import tegula.language as T
from tegula.errors import KernelSyntaxError, KernelTypeError, RaceError, ScopeError, ShapeError, SyncError
from tegula.ir.npu import NpuKernel, SetFlag, WaitCrossFlag
from tegula.ir.visitor import post_order_visit


def _kernels(f):
    ks = []
    post_order_visit(f.body, lambda n: ks.append(n) if isinstance(n, NpuKernel) else None)
    return ks


def test_cube_and_vector_make_an_npu_kernel(ascend_example):
    f = ascend_example("gemm_relu_950").gemm_relu(128, 128, 64)
    (k,) = _kernels(f)
    assert k.annotations["dialect"] == "a5" and k.sub_var.name == "sid"
    assert "T.gemm(A_l1, B_l1, C_l0, clear_accum=k == 0)" in f.script()


def test_missing_cross_core_wait_in_the_950_dialect_is_caught(ascend_example):
    from tegula.backends.npu.emu import execute
    from tegula.backends.npu.machine import A5
    from tegula.backends.npu.pipeline import lower
    from tegula.ir.stmt import seq
    from tegula.ir.visitor import Mutator
    from tegula.target import Target

    low = lower(ascend_example("gemm_relu_950").gemm_relu(128, 64, 64), Target("ascend-emu", "a5"), {})
    waits = []
    post_order_visit(low.body, lambda n: waits.append(n) if isinstance(n, WaitCrossFlag) else None)

    class Drop(Mutator):
        def visit(self, node):
            return seq() if node is waits[0] else super().visit(node)
    rng = np.random.default_rng()
    a, b = rng.standard_normal((128, 64)).astype(np.float16), rng.standard_normal((64, 64)).astype(np.float16)
    args = [a, b, np.zeros((128, 64), np.float32), np.zeros((128, 64), np.float32)]
    execute(low, args, A5)
    with pytest.raises((RaceError, SyncError), match="GM buffer 'W'"):
        execute(low.with_body(Drop().visit(low.body)), args, A5)


def test_ascend_flag_spellings():
    @T.prim_func
    def k(A: T.Tensor((16, 16), "float32")):
        with T.Kernel(1) as bx:
            a = T.alloc_shared((16, 16), "float32")
            with T.Vector(vector=2) as sid:
                T.copy(A, a)
                T.ascend_set_flag("MTE2_V", 1)
                T.ascend_wait_flag("MTE2_V", 1)
                with T.Task(latency=10):
                    T.fill(a, 1)
                T.ascend_pipe_barrier("PIPE_ALL")
    sets = []
    post_order_visit(k.body, lambda n: sets.append((n.src, n.dst)) if isinstance(n, SetFlag) else None)
    assert sets == [("MTE2", "V")]
    tegula.compile(k, target="ascend-emu:a5")(np.zeros((16, 16), np.float32))


def test_950_kernel_errors():
    with pytest.raises(KernelTypeError, match="one grid extent"):
        @T.prim_func
        def k(A: T.Tensor((16, 16), "float32")):
            with T.Kernel(2, 2) as (bx, by):
                with T.Cube():
                    pass
    with pytest.raises(KernelTypeError, match="2 vector cores"):
        @T.prim_func
        def k2(A: T.Tensor((16, 16), "float32")):
            with T.Kernel(2) as bx:
                with T.Vector(vector=4):
                    pass
    with pytest.raises(KernelTypeError, match='event like "MTE2_MTE1"'):
        @T.prim_func
        def k3(A: T.Tensor((16, 16), "float32")):
            with T.Kernel(2) as bx:
                with T.Cube():
                    T.ascend_set_flag("MTE2", 0)
    with pytest.raises(KernelSyntaxError, match="binds no name"):
        @T.prim_func
        def k4(A: T.Tensor((16, 16), "float32")):
            with T.Kernel(2) as bx:
                with T.Vector() as sid:
                    with T.SimtVF() as t:
                        pass


def _dual(M=64, N=64, K=32):
    @T.prim_func
    def k(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"),
          W: T.Tensor((M, N), "float32"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1) as bx:
            a = T.alloc_l1((M, K), "float16")
            b = T.alloc_l1((K, N), "float16")
            c = T.alloc_l0c((M, N), "float32")
            x = T.alloc_shared((M // 2, N), "float32")
            with T.Cube():
                T.copy(A, a)
                T.copy(B, b)
                T.gemm(a, b, c, clear_accum=True)
                T.copy(c, W)
            with T.Vector(vector=2):
                T.dual_copy(W[0, 0], x)                 # each vector core its half of the rows
                with T.SimtVF(threads=64):
                    for i, j in T.Parallel(M // 2, N):
                        x[i, j] = T.max(x[i, j], 0)
                T.dual_copy(x, C[0:M, 0:N])             # a region of both halves
    return k


@pytest.mark.parametrize("target", ["cpu", "ascend-emu:a2a3", "ascend-emu:a5"])
def test_dual_copy_splits_the_rows_between_the_vector_cores(target):
    rng = np.random.default_rng()
    a = rng.standard_normal((64, 32)).astype(np.float16)
    b = rng.standard_normal((32, 64)).astype(np.float16)
    w, c = np.zeros((64, 64), np.float32), np.full((64, 64), np.nan, np.float32)
    tegula.compile(_dual(), target=target, pass_configs={"tl.ascend_auto_sync": True})(a, b, w, c)
    np.testing.assert_allclose(c, np.maximum(a.astype(np.float64) @ b, 0), rtol=1e-3, atol=1e-3)


def test_dual_copy_errors():
    with pytest.raises(ScopeError, match="inside `with T.Vector"):
        @T.prim_func
        def k(A: T.Tensor((16, 16), "float32")):
            with T.Kernel(1) as bx:
                x = T.alloc_shared((8, 16), "float32")
                with T.Cube():
                    T.dual_copy(A[0, 0], x)
    with pytest.raises(ShapeError, match="needs 16"):
        @T.prim_func
        def k2(A: T.Tensor((16, 16), "float32")):
            with T.Kernel(1) as bx:
                x = T.alloc_shared((8, 16), "float32")
                with T.Vector():
                    T.dual_copy(A[0:8, 0:16], x)
    with pytest.raises(ScopeError, match="dual FixPipe is not built"):
        @T.prim_func
        def k3(A: T.Tensor((16, 16), "float32")):
            with T.Kernel(1) as bx:
                c = T.alloc_l0c((16, 16), "float32")
                x = T.alloc_shared((8, 16), "float32")
                with T.Vector():
                    T.dual_copy(c, x)


def test_the_dialect_loads_on_first_use_of_its_names(tmp_path):
    """`import tegula` leaves the NPU IR unloaded; T.alloc_L1 and friends load it when first used,
    and a CUDA-style kernel built meanwhile does not load it either."""
    import subprocess
    import sys

    code = ("import sys, tegula, tegula.language as T\n"
            "npu = lambda: sorted(m for m in sys.modules if m in ('tegula.language.ascend', 'tegula.ir.npu'))\n"
            "assert npu() == [], npu()\n"
            "@T.prim_func\n"
            "def f(A: T.Tensor((64,), 'float32')):\n"
            "    with T.Kernel(1, threads=64) as bx:\n"
            "        for i in T.Parallel(64):\n"
            "            A[i] = A[i] + 1.0\n"
            "assert npu() == [], npu()\n"
            "assert T.alloc_L1 is T.alloc_L1 and callable(T.tile.exp) and 'alloc_ub' in dir(T)\n"
            "assert npu() == ['tegula.ir.npu', 'tegula.language.ascend'], npu()\n"
            "from tegula.language import set_flag, Scope\n")
    (tmp_path / "prog.py").write_text(code)
    r = subprocess.run([sys.executable, str(tmp_path / "prog.py")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    with pytest.raises(AttributeError, match="has no attribute 'alloc_L9'"):
        T.alloc_L9  # noqa: B018
    from tegula.language import _ASCEND, ascend

    assert set(ascend.__all__) == _ASCEND
