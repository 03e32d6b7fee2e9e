"""The helper modules TileLang programs import: profiler.do_bench, utils, math, DataType, fp8,
the tvm namespace, engine.callback, pass configs, and the JIT objects as programs use them."""
import time

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="needs torch (pip install -e '.[torch]')")

import tegula
import tegula.language as T
from tegula import errors, passconfig
from tegula.compat import tvm
from tegula.compat.datatype import DataType
from tegula.compat.math import cdiv, next_power_of_2, prev_power_of_2
from tegula.compat.utils import get_tensor_supply
from tegula.engine.param import KernelParam
from tegula.language.fp8 import determine_fp8_type, determine_torch_fp8_type
from tegula.profiler import do_bench


def add_one(M, block=64, dtype="float32"):
    @T.prim_func
    def main(A: T.Tensor((M,), dtype), B: T.Tensor((M,), dtype)):
        with T.Kernel(T.ceildiv(M, block), threads=32) as bx:
            for i in T.Parallel(block):
                B[bx * block + i] = A[bx * block + i] + 1.0

    return main


def test_do_bench_function():
    t = do_bench(lambda: time.sleep(0.002), warmup=5, rep=20)
    assert 1.5 < t < 50
    qs = do_bench(lambda: time.sleep(0.001), warmup=1, rep=10, quantiles=[0.2, 0.5, 0.8])
    assert len(qs) == 3 and qs[0] <= qs[1] <= qs[2]
    assert do_bench(lambda: None, _n_warmup=1, _n_repeat=3, return_mode="min", backend="cupti") >= 0
    with pytest.raises(errors.ArgumentError, match="return_mode"):
        do_bench(lambda: None, return_mode="p99")


def test_kernel_params_and_tensor_supply(rng):
    k = tegula.compile(add_one(T.dynamic("m"), dtype="float16"), out_idx=[-1], target="cpu")
    params = k.params
    assert all(isinstance(p, KernelParam) for p in params)
    assert params[0].name == "A" and params[0].dtype == "float16" and params[0].is_dynamic()
    assert params[0].torch_dtype() is torch.float16 and params[0].dtype == T.float16
    k2 = tegula.compile(add_one(128), out_idx=[-1], target="cpu")
    p = k2.params[0]
    assert p.shape == [128] and p.dtype == "float32" and p.torch_dtype() is torch.float32 and not p.is_scalar()
    assert not p.is_unsigned() and not p.is_float4() and p.tilelang_dtype() is T.float32
    for supply in (tegula.TensorSupplyType.Integer, tegula.TensorSupplyType.Normal,
                   tegula.TensorSupplyType.One):
        x = get_tensor_supply(supply)(p)
        assert tuple(x.shape) == (128,) and x.dtype is torch.float32
        np.testing.assert_allclose(k2(x).double().numpy(), x.double().numpy() + 1.0, rtol=1e-6)
    assert bool((get_tensor_supply(tegula.TensorSupplyType.One)(p) == 1).all())
    with pytest.raises(errors.ArgumentError, match="dynamic dimensions"):
        get_tensor_supply(tegula.TensorSupplyType.Normal)(params[0])


def test_math_cdiv_datatype_fp8():
    assert [cdiv(a, 4) for a in (0, 1, 4, 5)] == [0, 1, 1, 2] and tegula.cdiv(1000, 128) == 8
    assert [next_power_of_2(x) for x in (0, 1, 3, 4, 1000)] == [1, 1, 4, 4, 1024]
    assert prev_power_of_2(1000) == 512
    assert tegula.DataType is DataType
    assert (DataType("float16").bits, DataType(T.bfloat16).bits, DataType("int4").bits) == (16, 16, 4)
    assert DataType("float4_e2m1fn").bits == 4 and DataType("float32x4").lanes == 4
    assert DataType(torch.int8).bits == 8 and str(DataType("uint8")) == "uint8"
    assert DataType("float8_e4m3").bits == 8 and DataType("float16") == "float16"
    with pytest.raises(ValueError):
        DataType("complex64")
    assert determine_fp8_type() is T.float8_e4m3fn and determine_fp8_type("e5m2") is T.float8_e5m2
    assert determine_torch_fp8_type("e5m2") is torch.float8_e5m2
    with pytest.raises(errors.ArgumentError):
        determine_fp8_type("e3m4")


def test_tvm_namespace():
    c = tvm.tirx.const(7, "uint32")
    assert isinstance(c, tvm.tirx.PrimExpr) and c.dtype.name == "uint32" and c.value == 7
    assert tvm.tirx.IntImm("int64", 3).dtype.name == "int64"
    assert tvm.tirx.FloatImm("float16", 0.5).value == 0.5
    x = tvm.tirx.Var("x", "int32")
    assert tvm.tirx.Cast("float32", x).dtype.name == "float32"
    assert tvm.tirx.Select(x > 1, x, tvm.tirx.const(0)).dtype.name == "int32"
    assert "T.min" in str(tvm.tirx.Min(x, 3)) and "T.max" in str(tvm.tirx.Max(x, 3))
    assert tvm.DataType("bfloat16").bits == 16
    t = tvm.target.Target("cuda -arch=sm_90a")
    assert t.kind.name == "cuda" and t.arch == "sm_90a" and str(t) == "cuda:sm_90a"
    assert str(tvm.target.Target("llvm")) == "cpu"
    assert issubclass(tvm.error.InternalError, tvm.TVMError)
    with pytest.raises(tvm.TVMError):
        tegula.compile(add_one(64), out_idx=[5], target="cpu")
    tvm.ir.assert_structural_equal(add_one(128), add_one(128))
    with pytest.raises(AssertionError, match="structural mismatch"):
        tvm.ir.assert_structural_equal(add_one(128), add_one(256))
    mod = tvm.IRModule({"main": add_one(64)})
    tvm.ir.assert_structural_equal(mod, tvm.IRModule.from_expr(add_one(64)))


def test_pass_context_gives_configs_to_kernels_inside():
    with tvm.transform.PassContext(config={"tl.disable_tma_lower": True}):
        with tvm.transform.PassContext(config={tegula.PassConfigKey.TL_ENABLE_FAST_MATH: True}):
            k = tegula.compile(add_one(64), out_idx=[-1], target="cpu",
                               pass_configs={"tl.disable_tma_lower": False})
    assert k.pass_configs == {"tl.disable_tma_lower": False, "tl.enable_fast_math": True}
    assert tegula.compile(add_one(64), out_idx=[-1], target="cpu").pass_configs == {}
    with pytest.raises(errors.ConfigError, match="did you mean 'tl.disable_tma_lower'"):
        with tvm.transform.PassContext(config={"tl.disable_tma_lowr": True}):
            pass


# the keys of TileLang 0.1.15's PassConfigKey (names: values)
TILELANG_0_1_15_KEYS = """TL_SIMPLIFY tl.Simplify
TL_SIMPLIFY_TRANSITIVELY_PROVE_INEQUALITIES transitively_prove_inequalities
TL_SIMPLIFY_CONVERT_BOOLEAN_TO_AND_OF_ORS convert_boolean_to_and_of_ors
TL_SIMPLIFY_APPLY_CONSTRAINTS_TO_BOOLEAN_BRANCHES apply_constraints_to_boolean_branches
TL_SIMPLIFY_PROPAGATE_KNOWNS_TO_PROVE_CONDITIONAL propagate_knowns_to_prove_conditional
TL_SIMPLIFY_PROPAGATE_KNOWNS_TO_SIMPLIFY_EXPRESSIONS propagate_knowns_to_simplify_expressions
TL_SIMPLIFY_ENABLE_LET_INLINE enable_simplify_let_inline
TL_DISABLE_BUFFER_INIT_CHECK tl.disable_buffer_init_check
TL_DISABLE_DATA_RACE_CHECK tl.disable_data_race_check
TL_DISABLE_PRELOWER_SEMANTIC_CHECK tl.disable_prelower_semantic_check
TL_DISABLE_WARP_SPECIALIZED tl.disable_warp_specialized
TL_ENABLE_AUTO_SCHEDULE tl.enable_auto_schedule
TL_ENABLE_AUTO_WARP_SPECIALIZATION tl.enable_auto_warp_specialization
TL_ENABLE_FAST_MATH tl.enable_fast_math
TL_PTXAS_REGISTER_USAGE_LEVEL tl.ptxas_register_usage_level
TL_DEVICE_COMPILE_FLAGS tl.device_compile_flags
TL_EMIT_LINE_DIRECTIVES tl.emit_line_directives
TL_CONFIG_INDEX_BITWIDTH tl.config_index_bitwidth
TL_ENABLE_REDUCER_PLAN_VERBOSE tl.enable_reducer_plan_verbose
TL_LAYOUT_COST_MODEL tl.layout_cost_model
TL_REDUCER_FORCE_BASELINE tl.reducer_force_baseline
TL_DISABLE_TMA_LOWER tl.disable_tma_lower
TL_DISABLE_SAFE_MEMORY_ACCESS tl.disable_safe_memory_legalize
TL_DISABLE_VECTORIZE_256 tl.disable_vectorize_256
TL_ENABLE_FP32X2_REDUCTION tl.enable_fp32x2_reduction
TL_ENABLE_ASYNC_COPY tl.enable_async_copy
TL_ENABLE_LOWER_LDGSTG tl.enable_lower_ldgstg
TL_ENABLE_LOWER_LDGSTG_PREDICATED tl.enable_lower_ldgstg_predicated
TL_ENABLE_VECTORIZE_PLANNER_VERBOSE tl.enable_vectorize_planner_verbose
TL_DISABLE_WGMMA tl.disable_wgmma
TL_DEBUG_MERGE_SHARED_MEMORY_ALLOCATIONS tl.debug_merge_shared_memory_allocations
TL_ENABLE_AGGRESSIVE_SHARED_MEMORY_MERGE tl.enable_aggressive_shared_memory_merge
TL_DISABLE_SHARED_MEMORY_REUSE tl.disable_shared_memory_reuse
TL_DISABLE_SHUFFLE_ELECT tl.disable_shuffle_elect
TL_DISABLE_LOOP_UNSWITCHING tl.disable_loop_unswitching
TL_LOOP_UNSWITCHING_ALLOW_NON_TRIVIAL_ELSE tl.loop_unswitching_allow_non_trivial_else
TL_IF_STMT_BINDING_INLINE_REPLAYABLE_BINDS tl.if_stmt_binding_inline_replayable_binds
TL_DISABLE_THREAD_STORAGE_SYNC tl.disable_thread_storage_sync
TL_FORCE_LET_INLINE tl.force_let_inline
TL_AST_PRINT_ENABLE tl.ast_print_enable
TL_LAYOUT_VISUALIZATION_ENABLE tl.layout_visualization_enable
TL_LAYOUT_VISUALIZATION_FORMATS tl.layout_visualization_formats
TL_STORAGE_REWRITE_DETECT_INPLACE tl.storage_rewrite_detect_inplace
TIR_ENABLE_EQUIV_TERMS_IN_CSE tir.enable_equiv_terms_in_cse_tir
TIR_DISABLE_CSE tirx.disable_cse_tir
TIR_SIMPLIFY tirx.Simplify
TIR_DISABLE_STORAGE_REWRITE tirx.disable_storage_rewrite
TIR_DISABLE_VECTORIZE tirx.disable_vectorize
TIR_USE_ASYNC_COPY tirx.use_async_copy
TIR_ENABLE_DEBUG tirx.enable_debug
TIR_MERGE_STATIC_SMEM tirx.merge_static_smem
TIR_ADD_LOWER_PASS tirx.add_lower_pass
TIR_NOALIAS tirx.noalias
CUDA_KERNELS_OUTPUT_DIR cuda.kernels_output_dir
TL_DISABLE_OUT_OF_BOUND_WARNING tl.disable_out_of_bound_warning
TL_ENABLE_DUMP_IR tl.enable_dump_ir
TL_DUMP_IR_DIR tl.dump_ir_path
TL_PASS_PROFILE tl.pass_profile
TL_PASS_PROFILE_THRESHOLD_MS tl.pass_profile_threshold_ms"""


def test_every_tilelang_pass_config_key_is_accepted():
    rows = [line.split() for line in TILELANG_0_1_15_KEYS.splitlines()]
    assert len(rows) == 59
    for name, value in rows:
        member = getattr(tegula.PassConfigKey, name)
        assert member == value and member.value == value and {value: 1}.get(member) == 1
        assert passconfig.check_pass_configs({member: 1}) == {value: 1}
        assert passconfig.check_pass_configs({value: 1}) == {value: 1}
        assert passconfig.effect(value)  # documented: what it does, or that it has no effect
    assert passconfig.effect("tl.disable_tma_lower").startswith("CUDA sm_90a")
    assert "WarpSpecialize" in passconfig.effect("tl.disable_warp_specialized")
    assert passconfig.effect("tl.disable_safe_memory_legalize") == passconfig.NO_EFFECT
    assert "fast math" in passconfig.effect(tegula.PassConfigKey.TL_ENABLE_FAST_MATH)
    assert passconfig.check_pass_configs({"tir.disable_vectorize": True}) == {"tirx.disable_vectorize": True}
    table = passconfig.describe()
    assert all(name in table for name, _ in rows)
    with pytest.raises(errors.ConfigError, match="unknown pass config key 'tl.enable_fastmath'") as ei:
        tegula.compile(add_one(64), out_idx=[-1], target="cpu", pass_configs={"tl.enable_fastmath": 1})
    assert "did you mean 'tl.enable_fast_math'" in str(ei.value)
    from tegula.transform import PassConfigKey
    assert PassConfigKey is tegula.PassConfigKey


def test_cuda_postproc_callback_rewrites_the_source():
    pytest.importorskip("cuda.bindings")
    from tegula.backends.cuda import postproc
    from tegula.compat import callback

    try:
        @callback.register_cuda_postproc_callback
        def mark(code, target):
            return "// rewritten for " + str(target) + "\n" + code

        k = tegula.compile(add_one(64), out_idx=[-1], target="cuda:sm_80")
        assert k.get_kernel_source().startswith("// rewritten for cuda:sm_80\n")

        @callback.register_cuda_postproc_callback(override=True)
        def bad(code, target):
            return None

        with pytest.raises(errors.CompileError, match="returned NoneType"):
            tegula.compile(add_one(128), out_idx=[-1], target="cuda:sm_80")
    finally:
        postproc.clear()
    assert "rewritten" not in tegula.compile(add_one(64), out_idx=[-1], target="cuda:sm_80").get_kernel_source()
    with pytest.raises(errors.UnsupportedError, match="no hip target"):
        callback.register_hip_postproc_callback(lambda c, t: c)


def _eager_add(A, block=64):
    M = T.const("M")
    A: T.Tensor((M,), "float32")
    B = T.empty((M,), "float32")
    with T.Kernel(T.ceildiv(M, block), threads=32) as bx:
        for i in T.Parallel(block):
            B[bx * block + i] = A[bx * block + i] + 1.0
    return B


def test_jit_objects(rng):
    from tegula.jit import JITImpl, JITKernel

    assert JITImpl is tegula.JITFunction and JITKernel is tegula.JITKernel
    lazy = tegula.jit(out_idx=[-1], target="cpu")(add_one)
    assert "T.Kernel" in lazy.get_kernel_source(128)
    eager = tegula.jit(target="cpu")(_eager_add)
    a = rng.standard_normal(256).astype(np.float32)
    src = eager.get_kernel_source(a, block=32)
    assert "B[" in src and "256" in src
    # no tensors: the shape symbols by name, as compile() takes them
    assert "384" in eager.get_kernel_source(M=384, block=32)
    assert "384" in eager.get_tir(M=384).script()
    np.testing.assert_allclose(eager(a, block=32), a.astype(np.float64) + 1.0, rtol=1e-6, atol=1e-6)


def test_profiler_func_and_run_once(rng):
    k = tegula.compile(add_one(128), out_idx=[-1], target="cpu")
    prof = k.get_profiler()
    assert prof.func is k
    assert prof.do_bench(prof.func, warmup=1, rep=1) > 0
    out = prof.run_once()
    assert tuple(out.shape) == (128,) and not bool(torch.isnan(out).any())


def test_contrib_nvcc_compute_version():
    from tegula.compat import device
    from tegula.contrib import nvcc
    from tegula.errors import ConfigError
    from tegula.target import Target

    assert nvcc.get_target_compute_version("sm_90a") == "9.0"
    assert nvcc.get_target_compute_version("cuda:sm_80") == "8.0"
    assert nvcc.get_target_compute_version(Target("cuda", "sm_90a")) == "9.0"
    assert nvcc.parse_compute_version("8.6") == (8, 6)
    cc = device.compute_capability()
    if cc is None:
        with pytest.raises(ConfigError, match="no CUDA GPU"):
            nvcc.get_target_compute_version()
    else:
        assert nvcc.get_target_compute_version() == f"{cc[0]}.{cc[1]}"
