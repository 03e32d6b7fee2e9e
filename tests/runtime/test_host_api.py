"""The host API TileLang programs touch besides kernels: ``tvm`` as a package, ``tilelang.utils``
target and device queries, ``__version__``, nvcc-style ``compile_flags`` under NVRTC, and
``T.use_swizzle`` on a 3-D grid."""
import importlib
import warnings

import numpy as np
import pytest

import tegula
import tegula.language as T
from tegula.backends.cuda import compiler
from tegula.errors import ConfigError, UnsupportedError

needs_nvrtc = pytest.mark.skipif(not compiler.nvrtc_available(), reason="NVRTC (cuda-bindings) not found")


# -------------------------------------------------------------------------------- tvm package
def test_tvm_is_a_package_with_the_namespaces_programs_import():
    tvm = importlib.import_module("tegula.compat.tvm")
    assert hasattr(tvm, "__path__")
    for name in ("tirx", "tir", "ir", "target", "transform", "error", "testing", "tirx.stmt_functor",
                 "tir.stmt_functor"):
        importlib.import_module(f"tegula.compat.tvm.{name}")
    assert tvm.tir is tvm.tirx and tvm.tirx.stmt_functor is importlib.import_module("tegula.compat.tvm.tir.stmt_functor")
    from tegula.compat.tvm.ir import PrimExpr
    from tegula.ir.expr import Expr

    assert PrimExpr is Expr is tvm.tirx.PrimExpr and isinstance(tvm.tirx.const(3, "int32"), PrimExpr)
    assert tvm.IRModule is tvm.ir.IRModule and tvm.Target is tvm.target.Target


def _scale(n, block):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, block), threads=32) as bx:
            for i in T.Parallel(block):
                B[bx * block + i] = A[bx * block + i] * 2.0
    return main


def test_stmt_functor_walks_a_kernels_ir():
    from tegula.compat.tvm.tirx.stmt_functor import ir_transform, post_order_visit, pre_order_visit
    from tegula.ir.expr import BufferLoad
    from tegula.ir.stmt import For, Kernel

    f = _scale(128, 64)
    post, pre = [], []
    post_order_visit(f.body, lambda n: post.append(type(n).__name__))
    assert "BufferLoad" in post and post.index("BufferLoad") < post.index("For") < post.index("Kernel")
    # pre-order: parents first; returning False skips a node's children
    pre_order_visit(f.body, lambda n: pre.append(type(n).__name__) or not isinstance(n, For))
    assert pre.index("Kernel") < pre.index("For") and "BufferLoad" not in pre
    loads = []
    post_order_visit(f.body, lambda n: loads.append(n) if isinstance(n, BufferLoad) else None)
    assert [ld.buffer.name for ld in loads] == ["A"]
    with pytest.raises(UnsupportedError, match="ir_transform"):
        ir_transform(f.body, None, None)
    kernels = []
    post_order_visit(f, lambda n: kernels.append(n) if isinstance(n, Kernel) else None)
    assert len(kernels) == 1 and post.count("Kernel") == 1


# -------------------------------------------------------------------------- utils.target/device
def test_determine_target_and_device_queries(monkeypatch):
    from tegula.compat.tvm.target import Target
    from tegula.utils import device, target

    assert target.determine_target("cpu") == "cpu"
    assert target.determine_target("cuda -arch=sm_90a") == "cuda:sm_90a"
    assert target.determine_target("llvm") == "cpu"
    assert target.determine_target(Target("cuda -arch=sm_80")) == "cuda:sm_80"
    t = target.determine_target("cuda:sm_80", return_object=True)
    assert isinstance(t, Target) and t.kind.name == "cuda" and t.arch == "sm_80"
    assert target.target_is_cuda("cuda:sm_90a") and not target.target_is_cuda("cpu")
    assert not target.target_is_hip("cuda") and target.target_get_warp_size("cuda") == 32
    monkeypatch.setenv("TEGULA_TARGET", "cpu")
    from tegula import config

    with config.override(default_target="cpu"):
        assert target.determine_target() == "cpu" == target.determine_target("auto")
    with pytest.raises(ConfigError, match="unknown target"):
        target.determine_target("tpu")
    assert target.check_cuda_availability() == device.IS_CUDA
    assert device.get_available_cpu_count() >= 1
    if not device.IS_CUDA:
        assert device.get_current_device() is None and device.Event is None
        with pytest.raises(ConfigError, match="no GPU"):
            device.device_synchronize()


def test_version_is_the_tilelang_api_level():
    from packaging.version import Version

    from tegula import version

    v = Version(tegula.__version__)
    assert v.public == version.TILELANG_API == "0.1.15" and v.local == f"tegula.{version.TEGULA_VERSION}"
    assert v >= Version("0.1.15")


# ------------------------------------------------------------------------------ compile flags
def test_nvcc_flags_translated_for_nvrtc():
    kept, dropped = compiler.nvrtc_options(
        ["-O3", "-Wno-deprecated-declarations", "--use_fast_math", "-lineinfo", "-Xcompiler", "-fPIC",
         "-Xptxas", "-v", "-D", "N=4", "-I", "inc", "--expt-relaxed-constexpr", "--maxrregcount", "128",
         "-ftz=true", "-ccbin", "g++", "-G"])
    assert kept == ["--use_fast_math", "-lineinfo", "-Xptxas=-v", "-DN=4", "-Iinc", "--maxrregcount=128",
                    "-ftz=true", "-G"]
    assert dropped == ["-O3", "-Wno-deprecated-declarations", "-Xcompiler=-fPIC", "--expt-relaxed-constexpr",
                       "-ccbin=g++"]


@needs_nvrtc
def test_nvcc_compile_flags_build_under_nvrtc_with_a_warning_naming_them():
    from tegula import config

    flags = ["-O3", "-Wno-deprecated-declarations", "--use_fast_math", "-lineinfo"]
    with config.override(cuda_backend="nvrtc", disable_cache=True), warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        k = tegula.compile(_scale(256, 64), out_idx=[-1], target="cuda:sm_80", compile_flags=flags)
    assert "__global__" in k.get_kernel_source()
    msgs = [str(x.message) for x in w if issubclass(x.category, compiler.CompileFlagsWarning)]
    assert len(msgs) == 1 and "-O3 -Wno-deprecated-declarations" in msgs[0]
    assert "--use_fast_math" not in msgs[0] and "-lineinfo" not in msgs[0]


# ------------------------------------------------------------------------- swizzle, 3-D grid
def _batched_add(b, m, n, bm, bn):
    @T.prim_func
    def main(A: T.Tensor((b, m, n), "float32"), B: T.Tensor((b, m, n), "float32"),
             C: T.Tensor((b, m, n), "float32")):
        with T.Kernel(T.ceildiv(n, bn), T.ceildiv(m, bm), b, threads=64) as (bx, by, bz):
            T.use_swizzle(2)
            for i, j in T.Parallel(bm, bn):
                C[bz, by * bm + i, bx * bn + j] = A[bz, by * bm + i, bx * bn + j] * 2.0 + B[bz, by * bm + i, bx * bn + j]
    return main


@pytest.mark.parametrize("target", ["cpu", "cuda-emu:sm_80"])
def test_use_swizzle_on_a_3d_grid_runs(target):
    rng = np.random.default_rng()
    a, b = (rng.standard_normal((3, 48, 80)).astype(np.float32) for _ in range(2))
    k = tegula.compile(_batched_add(3, 48, 80, 16, 16), out_idx=[-1], target=target)
    np.testing.assert_allclose(k(a, b), a.astype(np.float64) * 2.0 + b, rtol=1e-6, atol=1e-6)


def test_use_swizzle_on_a_3d_grid_generates_cuda():
    src = tegula.compile(_batched_add(3, 48, 80, 16, 16), out_idx=[-1], target="cuda:sm_80").get_kernel_source() \
        if compiler.available_backends() else None
    if src is None:
        from tegula.backends.cuda.pipeline import lower
        from tegula.backends.cuda.codegen import codegen
        from tegula.target import Target

        src = codegen(lower(_batched_add(3, 48, 80, 16, 16), Target("cuda", "sm_80"), {}),
                      Target("cuda", "sm_80"), {}).source
    assert "block rasterization" in src and "blockIdx.z" in src
