"""User mistakes in kernels are typed tegula errors that show the user's own line with a caret."""
import os

import numpy as np
import pytest

import tegula as tilelang
import tegula.language as T
from tegula import errors

THIS = os.path.basename(__file__)


def check(exc_info, cls, *needles, line_text=None):
    e = exc_info.value
    assert isinstance(e, cls), f"expected {cls.__name__}, got {type(e).__name__}: {e}"
    msg = str(e)
    for n in needles:
        assert n in msg, f"{n!r} not in:\n{msg}"
    assert f"{THIS}:" in msg, msg  # points at this file
    if line_text is not None:
        assert line_text in msg, msg
        caret_line = msg.splitlines()[msg.splitlines().index(next(l for l in msg.splitlines() if line_text in l)) + 1]
        assert "^" in caret_line
    # no internal file names in what the user reads
    for internal in ("parser.py", "semantic.py", "primitives.py", "builder.py"):
        assert internal not in msg, msg
    return msg


def test_unknown_name():
    with pytest.raises(errors.TegulaError) as ei:
        @T.prim_func
        def main(A: T.Tensor((16,), "float32")):
            with T.Kernel(1) as bx:
                x = T.alloc_fragment((16,), "float32")
                T.copy(A, xx)
    msg = check(ei, errors.KernelNameError, "name 'xx' is not defined", line_text="T.copy(A, xx)")
    assert "did you mean 'x'" in msg


def test_unknown_primitive_attribute():
    with pytest.raises(errors.TegulaError) as ei:
        @T.prim_func
        def main(A: T.Tensor((16,), "float32")):
            with T.Kernel(1) as bx:
                T.reduce_mx(A, A)
    check(ei, errors.KernelNameError, "no attribute 'reduce_mx'", "reduce_max", line_text="T.reduce_mx(A, A)")


def test_copy_shape_mismatch():
    with pytest.raises(errors.TegulaError) as ei:
        @T.prim_func
        def main(A: T.Tensor((128, 128), "float16")):
            with T.Kernel(1) as bx:
                s = T.alloc_shared((64, 32), "float16")
                T.copy(A[0:128, 0:32], s)
    check(ei, errors.ShapeError, "(128, 32)", "(64, 32)", line_text="T.copy(A[0:128, 0:32], s)")


def test_gemm_k_mismatch_and_scope():
    with pytest.raises(errors.TegulaError) as ei:
        @T.prim_func
        def main(A: T.Tensor((64, 64), "float16")):
            with T.Kernel(1) as bx:
                a = T.alloc_shared((64, 32), "float16")
                b = T.alloc_shared((16, 64), "float16")
                c = T.alloc_fragment((64, 64), "float32")
                T.gemm(a, b, c)
    check(ei, errors.ShapeError, "K=32", "K=16", line_text="T.gemm(a, b, c)")
    with pytest.raises(errors.TegulaError) as ei:
        @T.prim_func
        def main2(A: T.Tensor((64, 64), "float16")):
            with T.Kernel(1) as bx:
                b = T.alloc_shared((64, 64), "float16")
                c = T.alloc_fragment((64, 64), "float32")
                T.gemm(A, b, c)
    check(ei, errors.ScopeError, "global", line_text="T.gemm(A, b, c)")


def test_gemm_dtype_mismatch():
    with pytest.raises(errors.TegulaError) as ei:
        @T.prim_func
        def main(A: T.Tensor((64, 64), "float16")):
            with T.Kernel(1) as bx:
                a = T.alloc_shared((64, 64), "float16")
                b = T.alloc_shared((64, 64), "bfloat16")
                c = T.alloc_fragment((64, 64), "float32")
                T.gemm(a, b, c)
    check(ei, errors.DTypeError, "float16", "bfloat16")


def test_reduce_shape_mismatch():
    with pytest.raises(errors.TegulaError) as ei:
        @T.prim_func
        def main(A: T.Tensor((64, 64), "float32")):
            with T.Kernel(1) as bx:
                a = T.alloc_fragment((64, 32), "float32")
                m = T.alloc_fragment((32,), "float32")
                T.reduce_max(a, m, dim=1)
    check(ei, errors.ShapeError, "T.reduce_max", "(64,)", line_text="T.reduce_max(a, m, dim=1)")


def test_fragment_outside_parallel():
    with pytest.raises(errors.TegulaError) as ei:
        @T.prim_func
        def main(A: T.Tensor((64,), "float32")):
            with T.Kernel(1) as bx:
                f = T.alloc_fragment((64,), "float32")
                f[0] = 1.0
    check(ei, errors.ScopeError, "fragment 'f'", "T.Parallel", line_text="f[0] = 1.0")


def test_non_constant_tile_shape():
    n = T.dynamic("n")
    with pytest.raises(errors.TegulaError) as ei:
        @T.prim_func
        def main(A: T.Tensor((n,), "float32")):
            with T.Kernel(1) as bx:
                s = T.alloc_shared((n,), "float32")
    check(ei, errors.ShapeError, "compile-time constants", line_text="T.alloc_shared((n,), \"float32\")")


def test_wrong_arity_and_unknown_keyword():
    with pytest.raises(errors.TegulaError) as ei:
        @T.prim_func
        def main(A: T.Tensor((64,), "float32")):
            with T.Kernel(1) as bx:
                s = T.alloc_shared((64,), "float32")
                T.copy(A)
    check(ei, errors.KernelTypeError, "T.copy", "dst", line_text="T.copy(A)")
    with pytest.raises(errors.TegulaError) as ei:
        @T.prim_func
        def main2(A: T.Tensor((64,), "float32")):
            with T.Kernel(1) as bx:
                s = T.alloc_shared((64,), "float32")
                T.copy(A, s, bogus=1)
    check(ei, errors.KernelTypeError, "bogus")


def test_unknown_dtype():
    with pytest.raises(errors.TegulaError) as ei:
        @T.prim_func
        def main(A: T.Tensor((64,), "float32")):
            with T.Kernel(1) as bx:
                s = T.alloc_shared((64,), "float17")
    check(ei, errors.DTypeError, "float17")


def host_helper(x):
    return 1 if x > 2 else 0


def test_branching_on_runtime_value_in_host_python():
    with pytest.raises(errors.TegulaError) as ei:
        @T.prim_func
        def main(A: T.Tensor((64,), "float32")):
            with T.Kernel(4) as bx:
                A[0] = host_helper(bx)
    check(ei, errors.KernelTypeError, "only known when the kernel runs", line_text="A[0] = host_helper(bx)")


def test_self_update_in_loop_needs_alloc_var():
    with pytest.raises(errors.TegulaError) as ei:
        @T.prim_func
        def main(A: T.Tensor((64,), "float32"), B: T.Tensor((1,), "float32")):
            with T.Kernel(1) as bx:
                acc = A[0]
                for i in T.serial(64):
                    acc = acc + A[i]
                B[0] = acc
    check(ei, errors.KernelSyntaxError, "'acc'", "T.alloc_var", line_text="acc = acc + A[i]")


def test_tile_op_inside_parallel_and_break_in_parallel():
    with pytest.raises(errors.TegulaError) as ei:
        @T.prim_func
        def main(A: T.Tensor((64,), "float32")):
            with T.Kernel(1) as bx:
                s = T.alloc_shared((64,), "float32")
                for i in T.Parallel(64):
                    T.copy(A, s)
    check(ei, errors.ScopeError, "T.Parallel", line_text="T.copy(A, s)")
    with pytest.raises(errors.TegulaError) as ei:
        @T.prim_func
        def main2(A: T.Tensor((64,), "float32")):
            with T.Kernel(1) as bx:
                for i in T.Parallel(64):
                    break
    check(ei, errors.ScopeError, "break")


def test_primitive_outside_kernel():
    with pytest.raises(errors.TegulaError) as ei:
        @T.prim_func
        def main(A: T.Tensor((64,), "float32")):
            s = T.alloc_shared((64,), "float32")
    check(ei, errors.KernelSyntaxError, "T.Kernel")
    with pytest.raises(errors.KernelSyntaxError):
        T.copy(1, 2)


def test_error_inside_macro_points_at_macro_line():
    @T.macro
    def bad(buf):
        T.fill(buf, undefined_thing)

    with pytest.raises(errors.TegulaError) as ei:
        @T.prim_func
        def main(A: T.Tensor((64,), "float32")):
            with T.Kernel(1) as bx:
                s = T.alloc_shared((64,), "float32")
                bad(s)
    check(ei, errors.KernelNameError, "undefined_thing", line_text="T.fill(buf, undefined_thing)")


def test_host_python_error_is_wrapped():
    with pytest.raises(errors.TegulaError) as ei:
        @T.prim_func
        def main(A: T.Tensor((64,), "float32")):
            with T.Kernel(64 // 0) as bx:
                pass
    check(ei, errors.KernelTypeError, "ZeroDivisionError", line_text="64 // 0")


def test_parallel_arity():
    with pytest.raises(errors.TegulaError) as ei:
        @T.prim_func
        def main(A: T.Tensor((8, 8), "float32")):
            with T.Kernel(1) as bx:
                for i in T.Parallel(8, 8):
                    A[i, 0] = 1.0
    check(ei, errors.KernelTypeError, "2 dimension(s)", "1 name(s)")


# ---------------------------------------------------------------------------------------------
# bad arguments at call time
# ---------------------------------------------------------------------------------------------

n = T.dynamic("n")


@T.prim_func
def scale(X: T.Tensor((n, 16), "float32"), Y: T.Tensor((n, 16), "float32"), f: T.float32):
    with T.Kernel(T.ceildiv(n, 4)) as bx:
        for i, j in T.Parallel(4, 16):
            Y[bx * 4 + i, j] = X[bx * 4 + i, j] * f


@pytest.fixture(scope="module")
def scale_kernel():
    return tilelang.compile(scale, out_idx=[1], target="cpu")


def test_call_ok(scale_kernel, rng):
    x = rng.standard_normal((8, 16)).astype(np.float32)
    np.testing.assert_allclose(scale_kernel(x, 3.0), x.astype(np.float64) * 3, rtol=1e-6)


@pytest.mark.parametrize("args,needles", [
    (lambda: (np.ones((8, 16), np.float16), 1.0), ["'X'", "float32", "float16"]),
    (lambda: (np.ones((8, 16, 1), np.float32), 1.0), ["'X'", "2 dimension(s)", "got 3"]),
    (lambda: (np.ones((8, 15), np.float32), 1.0), ["'X'", "(n, 16)", "(8, 15)"]),
    (lambda: (np.ones((16, 8), np.float32).T, 1.0), ["'X'", "contiguous"]),
    (lambda: (np.ones((8, 16), np.float32),), ["takes 2 argument(s)", "missing 'f'"]),
    (lambda: (np.ones((8, 16), np.float32), "x"), ["'f'", "float32", "str"]),
    (lambda: ([[1.0]], 1.0), ["'X'", "expected a tensor", "list"]),
])
def test_bad_arguments(scale_kernel, args, needles):
    with pytest.raises(errors.ArgumentError) as ei:
        scale_kernel(*args())
    for nd in needles:
        assert nd in str(ei.value), str(ei.value)


def test_dynamic_dim_conflict():
    @T.prim_func
    def add(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32"), C: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, 8)) as bx:
            for i in T.Parallel(8):
                C[bx * 8 + i] = A[bx * 8 + i] + B[bx * 8 + i]

    k = tilelang.compile(add, out_idx=[-1], target="cpu")
    with pytest.raises(errors.ArgumentError) as ei:
        k(np.ones(8, np.float32), np.ones(9, np.float32))
    assert "'B'" in str(ei.value) and "'n'" in str(ei.value)


def test_torch_device_and_dtype(scale_kernel):
    torch = pytest.importorskip("torch")
    with pytest.raises(errors.ArgumentError) as ei:
        scale_kernel(torch.ones(8, 16, dtype=torch.bfloat16), 1.0)
    assert "bfloat16" in str(ei.value)
    with pytest.raises(errors.ArgumentError) as ei:
        scale_kernel(torch.ones(8, 16, device="meta"), 1.0)
    assert "meta" in str(ei.value) and "cpu" in str(ei.value)


def test_bad_out_idx_target_and_pass_config():
    with pytest.raises(errors.ConfigError, match="out_idx"):
        tilelang.compile(scale, out_idx=[5], target="cpu")
    with pytest.raises(errors.ConfigError, match="scalar"):
        tilelang.compile(scale, out_idx=[2], target="cpu")
    with pytest.raises(errors.ConfigError, match="unknown target"):
        tilelang.compile(scale, target="tpu")
    with pytest.raises(errors.ConfigError, match="tl.disable_tma_lower"):
        tilelang.compile(scale, target="cpu", pass_configs={"tl.disable_tma_lowr": True})
    k = tilelang.compile(scale, target="cpu", pass_configs={tilelang.PassConfigKey.TL_DISABLE_TMA_LOWER: True})
    assert k.pass_configs == {"tl.disable_tma_lower": True}


def test_check_well_formed_verifies_the_kernel():
    def build(check):
        @T.prim_func(check_well_formed=check)
        def main(A: T.Tensor((16,), "float32")):
            with T.Kernel(1) as bx:
                for i in T.serial(4):
                    A[i] = 1.0
                A[i] = 2.0
        return main

    # the frontend now sees this use after the loop itself, at the same line
    with pytest.raises(errors.TegulaError) as ei:
        build(True)
    check(ei, errors.KernelNameError, "loop that has ended", line_text="A[i] = 2.0")


def test_check_well_formed_runs_the_verifier(monkeypatch):
    import sys
    pf_mod = sys.modules["tegula.language.prim_func"]
    seen = []
    monkeypatch.setattr(pf_mod, "verify", lambda pf: seen.append(pf.name))

    def build(check):
        @T.prim_func(check_well_formed=check)
        def main(A: T.Tensor((16,), "float32")):
            with T.Kernel(1) as bx:
                for i in T.serial(4):
                    A[i] = 1.0
        return main

    build(False)
    assert seen == []  # not verified when asked not to
    build(True)
    assert seen == ["main"]


def test_unknown_dtype_in_an_annotation():
    with pytest.raises(errors.TegulaError) as ei:
        @T.prim_func
        def main(A: T.Tensor((16,), "float32")):
            with T.Kernel(1) as bx:
                x: "flaot32" = 1.0
                A[0] = x
    msg = check(ei, errors.DTypeError, "unknown dtype 'flaot32'", line_text='x: "flaot32" = 1.0')
    assert "did you mean 'float32'" in msg


def test_annotations_that_are_dtypes_or_python_types(rng):
    @T.prim_func
    def main(A: T.Tensor((4,), "float32"), B: T.Tensor((4,), "int32")):
        with T.Kernel(1) as bx:
            sizes: tuple = (4,)
            for i in T.serial(sizes[0]):
                x: "int32" = A[i]
                y: T.float32 = x
                B[i] = y
    a = (rng.standard_normal(4) * 10).astype(np.float32)
    b = np.zeros(4, np.int32)
    tilelang.compile(main, target="cpu")(a, b)
    np.testing.assert_array_equal(b, np.trunc(a).astype(np.int32))


def test_copy_region_past_a_tile_names_the_region_and_the_size():
    with pytest.raises(errors.TegulaError) as ei:
        @T.prim_func
        def main(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
            with T.Kernel(1, threads=128) as bx:
                S = T.alloc_shared((32, 32), "float32")
                T.copy(A[0:32, 0:32], S)
                T.copy(S[16:48, 0:32], B[0:32, 0:32])
    check(ei, errors.OutOfBoundsError, "T.copy source: the region S[16:48, 0:32] reaches beyond "
          "dimension 0 of 'S' (32, 32), which has size 32", line_text="T.copy(S[16:48, 0:32]")


def test_copy_start_element_past_a_tile():
    with pytest.raises(errors.TegulaError) as ei:
        @T.prim_func
        def main(A: T.Tensor((64, 64), "float32")):
            with T.Kernel(1, threads=128) as bx:
                F = T.alloc_fragment((32, 32), "float32")
                T.copy(A[0:32, 0:32], F[8, 0])
    check(ei, errors.OutOfBoundsError, "T.copy destination: the region F[8:40, 0:32]",
          line_text="T.copy(A[0:32, 0:32], F[8, 0])")


def test_index_past_a_tile_for_every_loop_index():
    with pytest.raises(errors.TegulaError) as ei:
        @T.prim_func
        def main(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                L = T.alloc_local((8,), "float32")
                for i in T.serial(4):
                    A[i] = L[i + 8]
    check(ei, errors.OutOfBoundsError, "from 8 to 11 over the enclosing loops",
          "dimension 0 of 'L', which has size 8", line_text="A[i] = L[i + 8]")


@pytest.mark.parametrize("target", ["cpu", "cuda-emu"])
def test_regions_inside_tiles_and_overhanging_globals_still_build(target, rng):
    """No false alarm: loop-dependent regions inside the tile, indices that are in range for
    some loop values, and global regions that overhang (reads give zero)."""
    @T.prim_func
    def main(A: T.Tensor((40, 32), "float32"), B: T.Tensor((64, 32), "float32")):
        with T.Kernel(1, threads=128) as bx:
            S = T.alloc_shared((64, 32), "float32")
            F = T.alloc_fragment((32, 32), "float32")
            T.copy(A[0:64, 0:32], S)  # rows 40.. of A do not exist: zeros
            for k in T.serial(2):
                T.copy(S[k * 32:(k + 1) * 32, 0:32], F)
                for i, j in T.Parallel(32, 32):
                    F[i, j] = F[i, j] * 2.0
                T.copy(F, B[k * 32, 0])

    a = rng.standard_normal((40, 32)).astype(np.float32)
    k = tilelang.compile(main, target=target)
    b = np.empty((64, 32), np.float32)
    k(a, b)
    want = np.zeros((64, 32))
    want[:40] = a.astype(np.float64) * 2.0
    np.testing.assert_allclose(b, want, rtol=1e-6)
