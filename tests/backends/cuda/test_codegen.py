"""CUDA codegen on hand-built thread-level IR: the text it writes, and that it compiles.

The IR builders here are also used by test_launch_gpu.py. Each stamps its nodes with the line
of this file that makes them, so the generated source carries ``// test_codegen.py:LINE`` comments.
"""
from __future__ import annotations

import inspect
import math
import re

import numpy as np
import pytest

from tegula.backends.cuda import compiler
from tegula.backends.cuda.codegen import codegen
from tegula.backends.cuda.codegen_expr import ExprPrinter, Names, literal
from tegula.errors import ResourceError, UnsupportedError, VerifyError
from tegula.ir import dtype as dt
from tegula.ir import expr as E
from tegula.ir import stmt as S
from tegula.ir.buffer import Buffer
from tegula.ir.expr import Builtin, Var
from tegula.ir.span import Span

BACKENDS = compiler.available_backends()
needs_compiler = pytest.mark.skipif(not BACKENDS, reason="neither NVRTC (cuda-bindings) nor nvcc found")
ARCHS = ("sm_80", "sm_90a")


def here() -> Span:
    """The span of the caller's line."""
    frame = inspect.currentframe().f_back  # type: ignore[union-attr]
    return Span(__file__, frame.f_lineno)  # type: ignore[union-attr]


# ---------------------------------------------------------------------------------------------
# IR builders
# ---------------------------------------------------------------------------------------------

def vector_add(n: int = 1000, threads: int = 128) -> S.PrimFunc:
    """C[i] = A[i] + B[i] over a 1-D grid, with the flattened thread index."""
    A = Buffer("A", (n,), "float32", span=here())
    B = Buffer("B", (n,), "float32", span=here())
    C = Buffer("C", (n,), "float32", span=here())
    bx, tx, i = Var("bx"), Var("tx"), Var("i")
    body = S.seq(
        S.LetStmt(i, bx * threads + tx, span=here()),
        S.IfThenElse(i < n, S.BufferStore(C, (i,), A[i] + B[i], span=here()), span=here()),
    )
    k = S.Kernel(grid=((n + threads - 1) // threads,), threads=(threads,), block_vars=(bx,), allocs=(),
                 body=body, thread_var=tx, span=here())
    return S.PrimFunc("vector_add", (A, B, C), k, span=here())


def row_sums(block_rows: int = 4, cols: int = 64) -> S.PrimFunc:
    """Out[r, c] = sum_j (X[r, j] * scale - j % 3) + c, for a dynamic number of rows ``m``.

    Uses a 2-D grid with a swizzle annotation, a 2-D thread block, shared memory staged with a
    barrier, a per-thread local array, a while loop over a local.var counter, a dynamic dim, a
    scalar parameter, floordiv / floormod and an unrolled loop. Grid (cols / 16, ceil(m /
    block_rows)), block (16, block_rows); each thread writes one element.
    """
    m = Var("m")
    scale = Var("scale", dt.float32)
    X = Buffer("X", (m, cols), "float32", span=here())
    Out = Buffer("Out", (m, cols), "float32", span=here())
    Xs = Buffer("Xs", (block_rows, cols), "float32", scope="shared.dyn", span=here())
    part = Buffer("part", (4,), "float32", scope="local", span=here())
    j = Buffer("j", (1,), "int32", scope="local.var", span=here())
    bx, by, t = Var("bx"), Var("by"), Var("t")
    r, c, q, row, e, k_ = Var("r"), Var("c"), Var("q"), Var("row"), Var("e"), Var("k")
    nthreads = 16 * block_rows
    jv = j.as_load()
    stage = S.For(q, E.const(0), cols * block_rows // nthreads, S.seq(
        S.LetStmt(e, t + q * nthreads, span=here()),
        S.IfThenElse(by * block_rows + e // cols < m,
                     S.BufferStore(Xs, (e // cols, e % cols), X[by * block_rows + e // cols, e % cols],
                                   span=here()), span=here()),
    ), span=here())
    body = S.seq(
        S.LetStmt(r, t // 16, span=here()),
        S.LetStmt(c, bx * 16 + t % 16, span=here()),
        S.LetStmt(row, by * block_rows + r, span=here()),
        stage,
        S.Evaluate(Builtin("sync_threads", ret=dt.bool_), span=here()),
        S.For(k_, E.const(0), 4, S.BufferStore(part, (k_,), E.const(0.0), span=here()), kind="unroll",
              span=here()),
        S.While(jv < cols, S.seq(
            S.BufferStore(part, (jv % 4,), part[jv % 4] + Xs[r, jv] * scale - E.cast(dt.float32, jv % 3),
                          span=here()),
            S.BufferStore(j, (0,), jv + 1, span=here()),
        ), span=here()),
        S.IfThenElse(row < m, S.BufferStore(
            Out, (row, c), part[0] + part[1] + part[2] + part[3] + E.cast(dt.float32, c), span=here()),
            span=here()),
    )
    k = S.Kernel(grid=(cols // 16, (m + block_rows - 1) // block_rows), threads=(16, block_rows),
                 block_vars=(bx, by), allocs=(Xs, part, j), body=body, thread_var=t,
                 alloc_inits={j: 0}, annotations={"swizzle": (2, "row")}, span=here())
    return S.PrimFunc("row_sums", (X, Out, scale), k, span=here())


def row_sums_reference(x: np.ndarray, scale: float, cols: int = 64) -> np.ndarray:
    """float64 reference of :func:`row_sums`."""
    j = np.arange(cols)
    acc = (x.astype(np.float64) * scale - (j % 3)[None, :]).sum(axis=1, keepdims=True)
    return acc + j[None, :]


def swizzle_count(gx: int, gy: int, panel: int, order: str) -> S.PrimFunc:
    """Count[by, bx] += 1 from thread 0 of every block: all ones iff the rasterization is a bijection."""
    Count = Buffer("Count", (gy, gx), "int32", span=here())
    bx, by = Var("bx"), Var("by")
    add = Builtin("tl::atomic_add", (Builtin("address_of", (Count[by, bx],)), E.const(1)), ret=dt.int32)
    body = S.IfThenElse(Builtin("thread_idx") == 0, S.Evaluate(add, span=here()), span=here())
    k = S.Kernel(grid=(gx, gy), threads=(32,), block_vars=(bx, by), allocs=(), body=body,
                 annotations={"swizzle": (panel, order)}, span=here())
    return S.PrimFunc("swizzle_count", (Count,), k, span=here())


def two_kernels(n: int = 256) -> S.PrimFunc:
    """Kernel 0: Y = X * 2 (1-D); kernel 1: Y += 1 with blocks of (32, 4) threads."""
    X = Buffer("X", (n,), "float16")
    Y = Buffer("Y", (n,), "float16")
    b0, t0, b1, t1 = Var("b"), Var("t"), Var("b"), Var("t")
    k0 = S.Kernel(grid=(n // 64,), threads=(64,), block_vars=(b0,), allocs=(), thread_var=t0,
                  body=S.BufferStore(Y, (b0 * 64 + t0,), X[b0 * 64 + t0] * E.const(2.0, dt.float16)))
    k1 = S.Kernel(grid=(n // 128,), threads=(32, 4), block_vars=(b1,), allocs=(), thread_var=t1,
                  body=S.BufferStore(Y, (b1 * 128 + t1,), Y[b1 * 128 + t1] + E.const(1.0, dt.float16)))
    return S.PrimFunc("two_kernels", (X, Y), S.seq(k0, k1))


# ---------------------------------------------------------------------------------------------
# Source text
# ---------------------------------------------------------------------------------------------

def test_vector_add_source():
    mod = codegen(vector_add())
    src = mod.source
    assert mod.kernel_names == ["vector_add_kernel"]
    assert 'extern "C" __global__ void __launch_bounds__(128) vector_add_kernel(' in src
    assert "const float* __restrict__ A" in src and "float* __restrict__ C" in src
    assert "const float* __restrict__ C" not in src
    assert "const int tx = threadIdx.x;" in src
    assert "const int bx = blockIdx.x;" in src
    assert "const int i = bx * 128 + tx;" in src
    assert "C[i] = A[i] + B[i];" in src
    assert re.search(r"// test_codegen\.py:\d+  S\.LetStmt\(i, bx \* threads \+ tx", src)
    assert '#include "tegula/common.h"' in src
    k = mod.kernels[0]
    assert k.grid == (8, 1, 1) and k.block == (128, 1, 1) and k.smem_bytes == 0
    assert [p.kind for p in mod.params] == ["buffer", "buffer", "buffer"]


def test_row_sums_source():
    mod = codegen(row_sums())
    src = mod.source
    k = mod.kernels[0]
    assert k.block == (16, 4, 1)
    assert k.smem_bytes == 4 * 64 * 4
    assert isinstance(k.grid[1], E.Expr)
    assert [(p.name, p.kind) for p in mod.params] == [("X", "buffer"), ("Out", "buffer"),
                                                      ("scale", "scalar"), ("m", "dim")]
    assert "float scale, int m)" in src
    assert "extern __shared__ __align__(1024) unsigned char tl_smem[];" in src
    assert "float* Xs = reinterpret_cast<float*>(tl_smem + 0);" in src
    assert "__align__(16) float part[4];" in src
    assert "int j = 0;" in src
    assert "const int t = (threadIdx.x + threadIdx.y * 16);" in src
    assert "__syncthreads();" in src
    assert "while (j < 64) {" in src
    assert "#pragma unroll" in src
    # dynamic rows (the buffer may exceed 2^31 elements: 64-bit offsets), power-of-two // and %
    assert "X[((long long)by * 4LL + ((long long)e >> 6)) * 64LL + ((long long)e & 63LL)]" in src
    assert "Xs[(e >> 6) * 64 + (e & 63)]" in src  # shared tiles stay 32-bit
    assert "tl::floormod(j, 3)" in src
    assert "j = ((int)((unsigned)j + 1u));" in src  # a local.var: a value, may wrap
    # swizzle: block ids come from the rasterization, not blockIdx directly
    assert "const int bx = blockIdx.x;" not in src
    assert "gridDim.y" in src
    # one comment per change of source line, each naming this file
    comments = re.findall(r"// test_codegen\.py:(\d+)", src)
    assert len(comments) >= 10
    assert all(a != b for a, b in zip(comments, comments[1:]))


def test_two_kernels_and_half():
    mod = codegen(two_kernels())
    assert mod.kernel_names == ["two_kernels_kernel_0", "two_kernels_kernel_1"]
    assert mod.kernels[1].block == (32, 4, 1)
    src = mod.source
    assert "Y[b * 64 + t] = X[b * 64 + t] * tl::cast<half_t>(2.0f);" in src
    assert "const int t = (threadIdx.x + threadIdx.y * 32);" in src


def _printer() -> tuple[ExprPrinter, dict]:
    names = Names()
    vs = {n: Var(n, d) for n, d in [("x", dt.int32), ("y", dt.int32), ("f", dt.float32),
                                    ("d", dt.float64), ("h", dt.float16), ("c", dt.int8),
                                    ("u", dt.uint32), ("l", dt.int64)]}
    for v in vs.values():
        names.bind(v)
    p = ExprPrinter(names, thread_idx="threadIdx.x")
    p.ranges.update({vs["x"]: (0, 10**6), vs["y"]: (-(10**3), 10**3)})  # small enough not to wrap
    return p, vs


def test_expression_spelling():
    p, v = _printer()
    x, y, f, d, h, c, u = (v[k] for k in "xyfdhcu")
    cases = [
        ((x + y) * 3, "(x + y) * 3"),
        (x - (y - 1), "x - (y - 1)"),
        (x // y, "tl::floordiv(x, y)"),
        (x % y, "tl::floormod(x, y)"),
        (x // 8, "x >> 3"),
        (x % 8, "x & 7"),
        (x // 1, "x"),
        (u // 3, "u / 3u"),
        (E.binary("div", x, y), "x / y"),
        (f // E.const(2.0), "floorf(f / 2.0f)"),
        (E.call("exp", f), "expf(f)"),
        (E.call("exp", d), "exp(d)"),
        (E.call("exp", h), "tl::cast<half_t>(expf(tl::cast<float>(h)))"),
        (E.call("sqrt", x), "sqrtf((float)x)"),
        (E.call("isnan", f), "isnan(f)"),
        (E.call("abs", x), "abs(x)"),
        (E.maximum(f, 0.0), "tl::max(f, 0.0f)"),
        (E.select(x < y, f, d.astype("float32")), "x < y ? f : (float)d"),
        (E.cast("float32", h), "tl::cast<float>(h)"),
        (E.cast("int64", x), "(long long)x"),
        (c + c, "((signed char)(c + c))"),
        ((x < y) & (y < 3) | (x == 0), "(x < y && y < 3) || x == 0"),
        ((x & 3) + 1, "(x & 3) + 1"),
        (x << 2 | y, "(x << 2) | y"),
        (-(x + 1), "-(x + 1)"),
        (x - (-y), "x - -y"),
        (Builtin("thread_idx"), "threadIdx.x"),
        (Builtin("tl::ldmatrix", (x,), attrs=(("template", (4, True)),)), "tl::ldmatrix<4, true>(x)"),
    ]
    for e, want in cases:
        assert p(e) == want, (e, p(e), want)


def test_signed_arithmetic_that_may_overflow_wraps():
    """Signed +, -, *, << and negation that interval analysis cannot keep in range go through the
    unsigned type of their width (defined modular arithmetic); index arithmetic stays plain."""
    p, v = _printer()
    x, c, l = v["x"], v["c"], v["l"]
    z = Var("z", dt.int32)  # no range known
    p.names.bind(z)
    A = Buffer("A", (64,), "int32")
    p.names.bind(A)
    cases = [
        (z * 65536 + 7, "((int)((unsigned)z * 65536u + 7u))"),
        (z - x, "((int)((unsigned)z - (unsigned)x))"),
        (-z, "((int)(-(unsigned)z))"),
        (z << 3, "((int)((unsigned)z << 3))"),
        (l * l, "((long long)((unsigned long long)l * (unsigned long long)l))"),
        (z * -1, "((int)((unsigned)z * 4294967295u))"),
        ((z + 1) // 2, "((int)((unsigned)z + 1u)) >> 1"),  # a wrapped operand of another operator
        (c << 4, "((signed char)((unsigned)c << ((signed char)4)))"),  # C computes c << 4 in int, UB if negative
        (c + c, "((signed char)(c + c))"),  # fits in C's int: plain, then narrowed
        (x * 2000 + 5, "x * 2000 + 5"),  # proven in range
        (E.cast("int32", v["u"]) + 1, "((int)((unsigned)(int)u + 1u))"),
        (A[z * 4 + 1], "A[z * 4 + 1]"),  # a buffer index
        (z * 4 + 1 < 64, "z * 4 + 1 < 64"),  # a guard over indices
        (A[z] * 4 + 1 < 64, "((int)((unsigned)A[z] * 4u + 1u)) < 64"),  # a loaded value
        (E.select(z * 2 >= 0, A[z * 2] * z, 0), "z * 2 >= 0 ? ((int)((unsigned)A[z * 2] * (unsigned)z)) : 0"),
    ]
    for e, want in cases:
        assert p(e) == want, (e, p(e), want)


def test_fast_math_spelling():
    p, v = _printer()
    p.fast_math = True
    assert p(E.call("exp", v["f"])) == "__expf(f)"
    assert p(E.call("exp", v["d"])) == "exp(d)"  # double keeps the precise function


@pytest.mark.parametrize("value,dtype,want", [
    (1.0, "float32", "1.0f"), (0.1, "float32", "0.1f"), (-2.5, "float64", "-2.5"),
    (1e30, "float32", "1e+30f"), (math.inf, "float32", "tl::infinity<float>()"),
    (-math.inf, "float64", "tl::lowest<double>()"), (math.nan, "float32", "__int_as_float(0x7fc00000)"),
    (1.5, "float16", "tl::cast<half_t>(1.5f)"), (math.inf, "bfloat16", "tl::infinity<bfloat16_t>()"),
    (7, "int32", "7"), (-(2**31), "int32", "(-2147483647 - 1)"), (5, "int64", "5LL"),
    (5, "uint32", "5u"), (5, "uint64", "5ULL"), (-3, "int8", "((signed char)-3)"), (True, "bool", "true"),
])
def test_literals(value, dtype, want):
    assert literal(value, dt.as_dtype(dtype))[0] == want


def test_float32_literals_round_trip():
    rng = np.random.default_rng()
    values = (rng.standard_normal(200) * 10.0 ** rng.integers(-30, 30, 200)).astype(np.float32)
    for v in values:
        text = literal(float(v), dt.float32)[0]
        assert np.float32(float(text.rstrip("f"))) == v


def test_errors():
    bad = S.PrimFunc("f", (), S.Kernel(grid=(1,), threads=(2048,), block_vars=(Var("b"),), allocs=(),
                                       body=S.Evaluate(Builtin("sync_threads"))))
    with pytest.raises(ResourceError, match="1024"):
        codegen(bad)
    unknown = S.PrimFunc("f", (), S.Kernel(grid=(1,), threads=(32,), block_vars=(Var("b"),), allocs=(),
                                           body=S.Evaluate(Builtin("frobnicate"))))
    with pytest.raises(UnsupportedError, match="unimplemented builtin frobnicate for target cuda"):
        codegen(unknown)
    A = Buffer("A", (4,), "float32")
    free = S.PrimFunc("f", (A,), S.Kernel(grid=(1,), threads=(32,), block_vars=(Var("b"),), allocs=(),
                                          body=S.BufferStore(A, (Var("zz"),), E.const(1.0))))
    with pytest.raises(VerifyError, match="zz"):
        codegen(free)
    frag = Buffer("F", (16, 16), "float32", scope="local.fragment")
    with pytest.raises(UnsupportedError, match="fragment"):
        codegen(S.PrimFunc("f", (), S.Kernel(grid=(1,), threads=(32,), block_vars=(Var("b"),),
                                             allocs=(frag,), body=S.Evaluate(Builtin("sync_threads")))))


def test_let_rebinding_gets_fresh_names():
    A = Buffer("A", (4,), "int32")
    v = Var("v")
    body = S.seq(S.LetStmt(v, E.const(1)), S.BufferStore(A, (0,), v),
                 S.LetStmt(v, v + 1), S.BufferStore(A, (1,), v))
    src = codegen(S.PrimFunc("f", (A,), S.Kernel(grid=(1,), threads=(1,), block_vars=(Var("b"),),
                                                 allocs=(), body=body))).source
    assert "const int v = 1;" in src and "const int v_1 = v + 1;" in src and "A[1] = v_1;" in src


def _swizzle_reference(gx: int, gy: int, panel: int, order: str) -> list[tuple[int, int]]:
    """The documented rasterization, in Python: (bx, by) for each linear block id."""
    out = []
    fast_n, slow_n = (gx, gy) if order == "row" else (gy, gx)
    for lid in range(gx * gy):
        strip, rem = lid // (panel * slow_n), lid % (panel * slow_n)
        width = min(panel, fast_n - strip * panel)
        fast, slow = strip * panel + rem % width, rem // width
        out.append((fast, slow) if order == "row" else (slow, fast))
    return out


@pytest.mark.parametrize("gx,gy,panel,order", [(7, 5, 2, "row"), (8, 3, 4, "row"), (5, 9, 4, "col"),
                                               (3, 3, 8, "row"), (1, 6, 2, "col")])
def test_swizzle_formula_is_a_bijection(gx, gy, panel, order):
    cells = _swizzle_reference(gx, gy, panel, order)
    assert sorted(cells) == [(x, y) for x in range(gx) for y in range(gy)]
    src = codegen(swizzle_count(gx, gy, panel, order)).source
    assert f"{panel} * (int)gridDim.{'y' if order == 'row' else 'x'}" in src
    assert "tl::atomic_add(&Count[by" in src and '#include "tegula/reduce.h"' in src


# ---------------------------------------------------------------------------------------------
# Compiles
# ---------------------------------------------------------------------------------------------

@needs_compiler
@pytest.mark.parametrize("backend", BACKENDS)
def test_ahead_of_time_compile_without_gpu(backend, tmp_path):
    """tegula.compile(target='cuda:sm_80') builds source and cubin; running needs a GPU."""
    import tegula
    from tegula import config
    from tegula.backends.cuda.launcher import CudaError
    from tegula.target import gpu_available

    func = vector_add(256)
    from tegula.transform import Pipeline

    with config.override(cuda_backend=backend, cache_dir=str(tmp_path)):  # already thread-level
        kernel = tegula.compile(func, out_idx=[2], target="cuda:sm_80", pipeline=Pipeline())
        again = tegula.compile(func, out_idx=[2], target="cuda:sm_80", pipeline=Pipeline())
    art = kernel.artifact
    assert "vector_add_kernel" in kernel.get_kernel_source()
    assert len(art.cubin) > 0 and art.metadata["arch"] == "sm_80"
    assert art.metadata["kernels"][0]["block"] == [128, 1, 1]
    assert again.artifact.metadata["cached"] and again.artifact.cubin == art.cubin
    if not gpu_available():
        # without a GPU; or, where nvcc built it but cuda-bindings is not installed, without the driver API
        with pytest.raises(CudaError, match="no usable CUDA GPU|running a CUDA kernel needs cuda-bindings"):
            art.run([None, None, None])


@needs_compiler
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("build", [vector_add, row_sums, two_kernels,
                                   lambda: swizzle_count(7, 5, 2, "row")])
def test_generated_source_compiles(build, arch):
    mod = codegen(build())
    res = compiler.compile_cuda(mod.source, arch)
    assert len(res.cubin) > 0


@needs_compiler
def test_math_and_builtins_compile():
    """Every math intrinsic on every float type, fast math, printf, shfl_xor, reinterpret, assign."""
    A = Buffer("A", (64,), "float32")
    H = Buffer("H", (64,), "float16")
    D = Buffer("D", (64,), "float64")
    S_ = Buffer("S", (64,), "float32", scope="shared")
    t = Var("t")
    stmts = []
    for name, nargs in E.INTRINSICS.items():
        for buf in (A, H, D):
            args = [buf[t]] * nargs
            val = E.call(name, *args)
            stmts.append(S.BufferStore(buf, (t,), E.cast(buf.dtype, val)))
    stmts.append(S.BufferStore(A, (t,), Builtin("shfl_xor", (A[t], E.const(1), E.const(32)), ret=dt.float32)))
    stmts.append(S.BufferStore(A, (t,), Builtin("shfl_xor", (A[t], E.const(1), E.const(8)), ret=dt.float32)))
    stmts.append(S.Evaluate(Builtin("printf", (A[t], H[t], t), attrs=(("fmt", "a=%f h=%f t=%d\n"),))))
    vec = Builtin("reinterpret", (S_[t * 4 % 64],), ret=dt.float32, attrs=(("ctype", "float4"),))
    gvec = Builtin("reinterpret", (A[t * 4 % 64],), ret=dt.float32, attrs=(("ctype", "float4"),))
    stmts.append(S.Evaluate(Builtin("assign", (vec, gvec))))
    stmts.append(S.Evaluate(Builtin("tl::cp_async_zfill", (Builtin("address_of", (S_[0],)),
                                                           Builtin("address_of", (A[0],)), t < 3),
                                    attrs=(("template", (16,)),))))
    stmts.append(S.Evaluate(Builtin("tl::cp_async_commit")))
    stmts.append(S.Evaluate(Builtin("tl::cp_async_wait", attrs=(("template", (0,)),))))
    k = S.Kernel(grid=(1,), threads=(64,), block_vars=(Var("b"),), allocs=(S_,), body=S.seq(*stmts),
                 thread_var=t)
    func = S.PrimFunc("mathy", (A, H, D), k)
    for fast in (False, True):
        mod = codegen(func, pass_configs={"tl.enable_fast_math": fast})
        compiler.compile_cuda(mod.source, "sm_80", fast_math=fast)


@needs_compiler
@pytest.mark.parametrize("arch", ARCHS)
def test_wrapping_arithmetic_compiles(arch):
    """The wrapping forms of every width compile: int32, int64, a narrow shift, a negation."""
    A, L, C = Buffer("A", (64,), "int32"), Buffer("L", (64,), "int64"), Buffer("C", (64,), "int8")
    t = Var("t")
    body = S.seq(S.BufferStore(A, (t,), A[t] * 65536 + E.const(-(2**31)) - (-A[t])),
                 S.BufferStore(L, (t,), L[t] * L[t] + (L[t] << 40)),
                 S.BufferStore(C, (t,), (C[t] << 5) + C[t]))
    k = S.Kernel(grid=(1,), threads=(64,), block_vars=(Var("b"),), allocs=(), body=body, thread_var=t)
    src = codegen(S.PrimFunc("wraps", (A, L, C), k)).source
    assert src.count("unsigned long long)") >= 3 and "(unsigned)A[t] * 65536u" in src
    assert len(compiler.compile_cuda(src, arch).cubin) > 0


def test_attr_stmt_and_typed_address():
    """AttrStmt bodies are emitted in place; address_of with a ctype casts the pointer."""
    R = Buffer("R", (8,), "float16", scope="local")
    C = Buffer("C", (8,), "float32")
    t = Var("t")
    call = Builtin("tl::mma_m16n8k16_f16_f32", (
        Builtin("address_of", (C[0],)),
        Builtin("address_of", (R[0],), attrs=(("ctype", "unsigned"),)),
        Builtin("address_of", (R[4],), attrs=(("ctype", "unsigned"),))))
    body = S.AttrStmt("tile_op", "T.gemm", S.Evaluate(call))
    k = S.Kernel(grid=(1,), threads=(32,), block_vars=(Var("b"),), allocs=(R,), body=body, thread_var=t)
    src = codegen(S.PrimFunc("attr", (C,), k)).source
    assert "// T.gemm" in src
    assert ("tl::mma_m16n8k16_f16_f32(&C[0], reinterpret_cast<unsigned*>(&R[0]), "
            "reinterpret_cast<unsigned*>(&R[4]));") in src
    assert '#include "tegula/mma.h"' in src


@pytest.mark.parametrize("with_sink", [False, True])
def test_check_resources_counts_the_static_scratch_of_wgmma_order_after(with_sink):
    """tl::wgmma_order_after (wgmma.h) declares a static 128-byte __shared__ array: a kernel whose
    planned shared memory is within 128 bytes of the limit does not fit with it."""
    from tegula.backends.cuda.machine import smem_limit
    from tegula.backends.cuda.passes.check_resources import check_resources

    limit = smem_limit("sm_90a")
    pool = Buffer("pool", (limit - 64,), "uint8", "shared")
    calls = [S.Evaluate(Builtin("tl::wgmma_order_after", (E.const(1.0),), dt.bool_))] if with_sink else []
    body = S.seq(S.BufferStore(pool, (E.const(0),), E.const(1, "uint8")), *calls)
    f = S.PrimFunc("f", (), S.Kernel(grid=(1,), threads=(128,), block_vars=(Var("b"),), allocs=(pool,),
                                     body=body, annotations={"smem_bytes": limit - 64}))
    if not with_sink:
        assert check_resources(f, "sm_90a") is f
        return
    with pytest.raises(ResourceError, match=rf"needs {limit + 64} bytes .*wgmma_order_after's static "
                                            r"scratch = 128 B"):
        check_resources(f, "sm_90a")
