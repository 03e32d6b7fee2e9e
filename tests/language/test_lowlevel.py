"""TIR-level spellings TileLang programs use: ``T.uint``, ``T.alloc_buffer``, bit-level decoding
helpers written with ``tvm.tirx`` (shifts, masks, ``reinterpret``), on every target.

Kernel tests run on the interpreter (``cpu``), the emulator of the CUDA output (``cuda-emu``) and,
marked ``gpu``, a GPU; ``built()`` also compiles each kernel for sm_80 and sm_90a.
"""
from __future__ import annotations

import numpy as np
import pytest

import tegula
import tegula.language as T
from tegula.compat import tvm
from test_features import built, target, to_device, to_host  # noqa: F401 (fixture)


def test_uint_is_uint32():
    assert T.uint is T.uint32 and T.dtype("uint") is T.uint32 and T.dtype("int") is T.int32
    assert T.uint == "uint32"


# -- bit-level decoding: 4-bit fields of a byte to float16 ------------------------------------

def _nibble_to_f16(val, pos):
    """s1e2m1 in ``val``'s nibble ``pos`` as float16 bits (exponent rebased by 14), the way
    dequantization helpers are written with tvm.tirx."""
    u16 = T.uint16
    f4 = (val >> (pos.astype(u16) * tvm.tirx.const(4, u16))) & tvm.tirx.const(15, u16)
    s = f4 >> tvm.tirx.const(3, u16)
    e = ((f4 & tvm.tirx.const(6, u16)) >> tvm.tirx.const(1, u16)) + tvm.tirx.const(14, u16)
    m = f4 & tvm.tirx.const(1, u16)
    return tvm.tirx.reinterpret(T.float16, ((e | (s << tvm.tirx.const(5, u16))) << tvm.tirx.const(10, u16)
                                            | m << tvm.tirx.const(9, u16)).astype(u16))


def decode_kernel(N, K, block_N=32):
    @T.prim_func
    def decode(B: T.Tensor((N, K // 2), T.uint8), C: T.Tensor((N, K), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), threads=128) as bx:
            B_local = T.alloc_fragment((block_N, K // 2), T.uint8)
            C_local = T.alloc_fragment((block_N, K), T.float16)
            T.copy(B[bx * block_N, 0], B_local)
            for i, j in T.Parallel(block_N, K):
                C_local[i, j] = _nibble_to_f16(B_local[i, j // 2], j % 2)
            T.copy(C_local, C[bx * block_N, 0])

    return decode


def _decode_ref(b):
    f4 = np.stack((b & 15, b >> 4), axis=-1).reshape(b.shape[0], -1).astype(np.uint16)
    bits = (((f4 & 6) >> 1) + 14 | (f4 >> 3) << 5) << 10 | (f4 & 1) << 9
    return bits.astype(np.uint16).view(np.float16)


def test_nibble_decode_through_reinterpret(target, rng):
    N, K = 64, 64
    k = built(decode_kernel(N, K), target, out_idx=[1])
    b = rng.integers(0, 256, (N, K // 2), dtype=np.uint8)
    (db,) = to_device(target, b)
    np.testing.assert_array_equal(to_host(k(db)).view(np.uint16), _decode_ref(b).view(np.uint16))


# -- T.alloc_buffer --------------------------------------------------------------------------

def square_then_sum_kernel(M, N):
    @T.prim_func
    def two_pass(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M,), "float32")):
        sq = T.alloc_buffer((M, N), "float32")  # global scratch between the two kernels
        with T.Kernel(M, threads=128) as bm:
            stage = T.alloc_buffer((N,), "float32", scope="shared")
            tile = T.alloc_buffer((N,), "float32", scope="local.fragment")
            T.copy(X[bm, 0], stage)
            for j in T.Parallel(N):
                tile[j] = stage[j] * stage[j]
            T.copy(tile, sq[bm, 0])
        with T.Kernel(1, threads=32):
            t = T.get_thread_binding()
            acc = T.alloc_buffer((1,), "float32", scope="local")
            for r in T.serial(T.ceildiv(M, 32)):
                if r * 32 + t < M:
                    acc[0] = 0.0
                    for j in T.serial(N):
                        acc[0] += sq[r * 32 + t, j]
                    Y[r * 32 + t] = acc[0]

    return two_pass


def test_alloc_buffer_scopes(target, rng):
    M, N = 40, 64
    k = built(square_then_sum_kernel(M, N), target, out_idx=[-1])
    x = rng.standard_normal((M, N)).astype(np.float32)
    (dx,) = to_device(target, x)
    np.testing.assert_allclose(to_host(k(dx)), (x.astype(np.float64) ** 2).sum(-1), rtol=1e-5, atol=1e-4)
    assert k.func.num_workspaces == 1


def test_alloc_buffer_unknown_scope_names_the_line():
    with pytest.raises(tegula.errors.KernelTypeError, match="unknown scope 'texture'") as e:
        @T.prim_func
        def bad(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=32):
                t = T.alloc_buffer((4,), "float32", scope="texture")  # noqa: F841
                A[0] = 1.0
    assert "test_lowlevel.py" in str(e.value) and "scope=\"texture\"" in str(e.value)


# -- T.attr reduce_scope + T.tvm_thread_allreduce ------------------------------------------------

def allreduce_gemv_kernel(N, K, threads, dim, accum="float32"):
    """y = A @ x with one output per group of threads that differ in thread index ``dim``."""
    red = threads[dim]
    rows = threads[1 - dim]

    @T.prim_func
    def gemv(A: T.Tensor((N, K), "float16"), x: T.Tensor((K,), "float16"), y: T.Tensor((N,), "float32")):
        with T.Kernel(N // rows, threads=threads) as bn:
            tr = T.get_thread_binding(dim)
            tn = T.get_thread_binding(1 - dim)
            acc = T.alloc_local((1,), accum)
            total = T.alloc_local((1,), accum)
            T.clear(acc)
            for ko in T.serial(K // red):
                acc[0] += A[bn * rows + tn, ko * red + tr].astype(accum) * x[ko * red + tr].astype(accum)
            with T.attr(T.comm_reducer(lambda a, b: a + b, [T.cast(0, accum)]), "reduce_scope",
                        T.reinterpret(T.uint64(0), dtype="handle")):
                T.evaluate(T.tvm_thread_allreduce(T.uint32(1), acc[0], True, total[0], tr, dtype="handle"))
            if tr == 0:
                y[bn * rows + tn] = total[0]

    return gemv


@pytest.mark.parametrize("threads,dim", [((32, 4), 0),    # lanes of one warp: shuffles
                                         ((2, 32), 1),    # strided over two warps: shared scratch
                                         ((8, 4), 0)])    # 32 threads, 8 per group: shuffles
def test_thread_allreduce_sum(target, rng, threads, dim):
    N, K = 16, 128
    k = built(allreduce_gemv_kernel(N, K, threads, dim), target, out_idx=[2])
    a = rng.standard_normal((N, K)).astype(np.float16)
    x = rng.standard_normal(K).astype(np.float16)
    y = to_host(k(*to_device(target, a, x)))
    ref = a.astype(np.float64) @ x.astype(np.float64)
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-3)
    src = tegula.compile(allreduce_gemv_kernel(N, K, threads, dim), out_idx=[2],
                         target="cuda-emu").get_kernel_source()
    assert ("shfl_xor" in src) == (threads != (2, 32))


def allreduce_max_kernel(N, K):
    @T.prim_func
    def rowmax(A: T.Tensor((N, K), "float32"), y: T.Tensor((N,), "float32")):
        with T.Kernel(N, threads=K) as bn:
            t = T.thread_binding(0, K, thread="threadIdx.x")
            v = T.alloc_local((1,), "float32")
            out = T.alloc_local((1,), "float32")
            v[0] = A[bn, t]
            with T.attr(T.comm_reducer(lambda a, b: T.max(a, b), [T.min_value("float32")]),
                        "reduce_scope", T.reinterpret(T.uint64(0), dtype="handle")):
                T.evaluate(T.tvm_thread_allreduce(T.uint32(1), v[0], True, out[0], t, dtype="handle"))
            y[bn] = out[0] + T.cast(t, "float32") * 0  # every thread holds the result

    return rowmax


def test_thread_allreduce_max_every_thread_has_it(target, rng):
    N, K = 8, 64
    k = built(allreduce_max_kernel(N, K), target, out_idx=[1])
    a = rng.standard_normal((N, K)).astype(np.float32)
    np.testing.assert_array_equal(to_host(k(*to_device(target, a))), a.max(-1))


def test_thread_allreduce_errors_name_the_line():
    with pytest.raises(tegula.errors.ScopeError, match="needs the reducer of an enclosing") as e:
        @T.prim_func
        def no_scope(A: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32):
                t = T.get_thread_binding(0)
                v = T.alloc_local((1,), "float32")
                T.evaluate(T.tvm_thread_allreduce(T.uint32(1), A[t], True, v[0], t, dtype="handle"))
                A[t] = v[0]
    assert "T.tvm_thread_allreduce(T.uint32(1), A[t]" in str(e.value)
    with pytest.raises(tegula.errors.UnsupportedError, match="T.attr key 'pragma_unroll'") as e:
        @T.prim_func
        def bad_key(A: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32):
                with T.attr(0, "pragma_unroll", 1):
                    A[0] = 1.0
    assert "test_lowlevel.py" in str(e.value)
    with pytest.raises(tegula.errors.KernelTypeError, match="does not match the kernel's threads"):
        @T.prim_func
        def bad_bind(A: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32):
                A[T.thread_binding(0, 64, thread="threadIdx.x")] = 1.0


# -- T.attr keys other than reduce_scope --------------------------------------------------------

def attr_kernel(key, node, value, as_with):
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            if as_with:
                with T.attr(node, key, value):
                    for i, j in T.Parallel(32, 32):
                        B[by * 32 + i, bx * 32 + j] = A[by * 32 + i, bx * 32 + j] * 2.0 + 1.0
            else:
                T.attr(node, key, value)
                for i, j in T.Parallel(32, 32):
                    B[by * 32 + i, bx * 32 + j] = A[by * 32 + i, bx * 32 + j] * 2.0 + 1.0

    return main


ATTR_CASES = [("tl.min_blocks_per_sm", None, 3, False), ("threadblock_swizzle_pattern", None,
              ("rasterization2DColumn", 2), False), ("pragma_unroll_explicit", 0, 1, True),
              ("pragma_auto_unroll_max_step", 0, 16, True), ("pragma_scope", 0, "seq", True),
              ("async_scope", 1, 1, True)]


@pytest.mark.parametrize("key,node,value,as_with", ATTR_CASES, ids=[c[0] for c in ATTR_CASES])
@pytest.mark.parametrize("where", ["cpu", "cuda-emu"])
def test_attr_keys_with_a_meaning(key, node, value, as_with, where, rng):
    f = attr_kernel(key, node, value, as_with)
    a = rng.standard_normal((64, 64)).astype(np.float32)
    b = np.full_like(a, np.nan)
    built(f, where)(a, b)
    np.testing.assert_allclose(b, a.astype(np.float64) * 2.0 + 1.0, rtol=1e-6)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_attr_annotations_reach_the_cuda_source(arch):
    src = tegula.compile(attr_kernel("tl.min_blocks_per_sm", None, 3, False),
                         target=f"cuda:{arch}").get_kernel_source()
    assert "__launch_bounds__(128, 3)" in src
    src = tegula.compile(attr_kernel("threadblock_swizzle_pattern", None, ("rasterization2DColumn", 2),
                                     False), target=f"cuda:{arch}").get_kernel_source()
    assert "block rasterization: strips of 2 rows" in src
    # the same as T.annotate_min_blocks_per_sm, which the printed IR shows
    f = attr_kernel("tl.min_blocks_per_sm", None, 3, False)
    assert "T.annotate_min_blocks_per_sm(3)" in f.script()

    @T.prim_func
    def direct(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            T.annotate_min_blocks_per_sm(2)
            for i in T.Parallel(64):
                A[i] = A[i] + 1.0

    src = tegula.compile(direct, target=f"cuda:{arch}",
                         pass_configs={"tegula.min_blocks_per_sm": 4}).get_kernel_source()
    assert "__launch_bounds__(64, 2)" in src  # the kernel's own annotation wins


def test_attr_keys_without_a_meaning_are_located_errors():
    with pytest.raises(tegula.errors.UnsupportedError) as e:
        attr_kernel("thread_extent", None, 128, False)
    msg = str(e.value)
    assert "T.attr key 'thread_extent' is not supported" in msg and "test_lowlevel.py" in msg
    assert "T.attr(node, key, value)" in msg and "T.Kernel(..., threads=n)" in msg
    with pytest.raises(tegula.errors.UnsupportedError) as e:
        attr_kernel("pragma_auto_unrol_max_step", 0, 4, True)
    assert "did you mean 'pragma_auto_unroll_max_step'" in str(e.value)
    with pytest.raises(tegula.errors.UnsupportedError, match="rasterization2DRow or rasterization2DColumn"):
        attr_kernel("threadblock_swizzle_pattern", None, ("rasterization2DMLX", 2), False)
    with pytest.raises(tegula.errors.KernelTypeError, match="n must be a positive Python int"):
        attr_kernel("tl.min_blocks_per_sm", None, 0, False)


# -- T.alloc_reducer -----------------------------------------------------------------------------

def reducer_gemv_kernel(M, N, block_M, block_N, op="sum"):
    @T.prim_func
    def gemv(a: T.Tensor((M, N), "float16"), x: T.Tensor((N,), "float16"), o: T.Tensor((M,), "float32")):
        with T.Kernel(M // block_M, threads=128) as bm:
            r = T.alloc_reducer(block_M, "float32", op=op, replication="all")
            if op == "sum":
                T.clear(r)
            else:
                T.fill(r, T.min_value("float32"))
            for kn in T.Pipelined(N // block_N, num_stages=2):
                a_frag = T.alloc_fragment((block_M, block_N), "float16")
                x_frag = T.alloc_fragment((block_N,), "float16")
                T.copy(a[bm * block_M, kn * block_N], a_frag)
                T.copy(x[kn * block_N], x_frag)
                for i, j in T.Parallel(block_M, block_N):
                    if op == "sum":
                        r[i] += a_frag[i, j] * x_frag[j]
                    else:
                        r[i] = T.max(r[i], a_frag[i, j].astype("float32") * x_frag[j])
            T.finalize_reducer(r)
            T.copy(r, o[bm * block_M])

    return gemv


@pytest.mark.parametrize("op", ["sum", "max"])
def test_alloc_reducer(target, rng, op):
    M, N = 64, 128
    k = built(reducer_gemv_kernel(M, N, 32, 32, op), target, out_idx=[2])
    a = rng.standard_normal((M, N)).astype(np.float16)
    x = rng.standard_normal(N).astype(np.float16)
    o = to_host(k(*to_device(target, a, x)))
    prod = a.astype(np.float64) * x.astype(np.float64)
    if op == "sum":  # a float16 product, rounded to float16, then accumulated
        prod = prod.astype(np.float16).astype(np.float64)
    ref = prod.sum(-1) if op == "sum" else prod.max(-1)
    np.testing.assert_allclose(o, ref, rtol=1e-3, atol=1e-3)


def test_reducer_update_form_is_checked():
    with pytest.raises(tegula.errors.KernelTypeError, match=r"updated as `r\[i\] \+= v`") as e:
        @T.prim_func
        def bad(A: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32):
                r = T.alloc_reducer(32, "float32")
                T.clear(r)
                for i in T.Parallel(32):
                    r[i] = A[i]
                T.finalize_reducer(r)
                T.copy(r, A)
    assert "r[i] = A[i]" in str(e.value)


# -- T.import_source / T.call_extern / T.access_ptr ---------------------------------------------

_SCALE_SRC = """
template <typename T1, typename T2>
__device__ void scale_by_two(T1 *src, T2 *dst, const int n) {
  for (int i = 0; i < n; ++i) dst[i] = (T2)((float)src[i] * 2.0f);
}
"""


def extern_kernel(N, src=_SCALE_SRC):
    @T.prim_func
    def ext(X: T.Tensor((N,), "float16"), Y: T.Tensor((N,), "float16")):
        with T.Kernel(N // 128, threads=32) as bx:
            tx = T.get_thread_binding()
            a = T.alloc_local((4,), "float16")
            b = T.alloc_local((4,), "float16")
            T.import_source(src)
            for v in T.vectorized(4):
                a[v] = X[bx * 128 + tx * 4 + v]
            T.call_extern("scale_by_two", T.access_ptr(a, "r"), T.access_ptr(b, "w"), 4, dtype="float16")
            for v in T.vectorized(4):
                Y[bx * 128 + tx * 4 + v] = b[v]

    return ext


def test_extern_source_is_in_the_module_before_the_kernel():
    for arch in ("sm_80", "sm_90a"):
        k = tegula.compile(extern_kernel(256), target=f"cuda:{arch}")
        src = k.get_kernel_source()
        assert src.count("scale_by_two(T1 *src") == 1
        assert src.index("scale_by_two(T1 *src") < src.index("__global__")
        assert "scale_by_two(&a[0], &b[0], 4);" in src
        if "cubin" in dir(k.artifact):
            assert k.artifact.cubin


@pytest.mark.parametrize("host", ["cpu", "cuda-emu"])
def test_extern_code_on_a_host_target_is_an_error_at_the_call(host):
    with pytest.raises(tegula.errors.UnsupportedError, match="T.call_extern\\('scale_by_two'\\) calls C"
                       ) as e:
        k = tegula.compile(extern_kernel(256), target=host)
        k(np.ones(256, np.float16), np.ones(256, np.float16))
    assert 'T.call_extern("scale_by_two"' in str(e.value)


@pytest.mark.gpu
def test_extern_code_runs_on_the_gpu(rng):
    if not tegula.target.gpu_available():
        pytest.skip("no CUDA GPU")
    k = tegula.compile(extern_kernel(256), out_idx=[1], target="cuda")
    x = rng.standard_normal(256).astype(np.float16)
    np.testing.assert_array_equal(to_host(k(*to_device("cuda", x))), x * 2)


def test_access_ptr_of_a_fragment_is_an_error():
    with pytest.raises(tegula.errors.ScopeError, match="has no address") as e:
        @T.prim_func
        def bad(A: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=32):
                f = T.alloc_fragment((32,), "float32")
                T.call_extern("g", T.access_ptr(f, "w"))
                T.copy(f, A)
    assert "T.access_ptr(f" in str(e.value)


def test_shift_helpers_and_block_binding(target, rng):
    @T.prim_func
    def shifts(X: T.Tensor((4, 32), "int32"), Y: T.Tensor((4, 32), "int32")):
        with T.Kernel(4, threads=32):
            t = T.get_thread_binding()
            b = T.get_block_binding(0)
            Y[b, t] = T.shift_left(X[b, t], 3) + T.shift_right(X[b, t], 2) + b

    k = built(shifts, target, out_idx=[1])
    x = rng.integers(-1000, 1000, (4, 32), dtype=np.int32)
    np.testing.assert_array_equal(to_host(k(*to_device(target, x))),
                                  (x << 3) + (x >> 2) + np.arange(4)[:, None])


def test_dp4a(target, rng):
    @T.prim_func
    def dot(A: T.Tensor((4, 64), "int8"), B: T.Tensor((4, 64), "int8"), C: T.Tensor((4, 32), "int32")):
        with T.Kernel(4, threads=32) as bx:
            t = T.get_thread_binding()
            a = T.alloc_local((8,), "int8")
            b = T.alloc_local((8,), "int8")
            acc = T.alloc_local((1,), "int32")
            acc[0] = 7
            for v in T.vectorized(2):
                a[v] = A[bx, t * 2 + v]
                b[v] = B[bx, t * 2 + v]
            for v in T.serial(6):
                a[2 + v] = a[v % 2] + v
                b[2 + v] = b[v % 2] - v
            T.dp4a(a[0], b[0], acc[0])
            T.dp4a(a[4], b[4], acc[0])
            C[bx, t] = acc[0]

    k = built(dot, target, out_idx=[2])
    x = rng.integers(-100, 100, (4, 64), dtype=np.int8)
    y = rng.integers(-100, 100, (4, 64), dtype=np.int8)
    got = to_host(k(*to_device(target, x, y)))
    a = np.empty((4, 32, 8), np.int64)
    b = np.empty((4, 32, 8), np.int64)
    a[..., :2], b[..., :2] = x.reshape(4, 32, 2), y.reshape(4, 32, 2)
    for v in range(6):
        a[..., 2 + v] = (a[..., v % 2] + v).astype(np.int8)
        b[..., 2 + v] = (b[..., v % 2] - v).astype(np.int8)
    np.testing.assert_array_equal(got, 7 + (a * b).sum(-1))
