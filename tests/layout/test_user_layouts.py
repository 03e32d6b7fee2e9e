"""User layouts applied: ``T.annotate_layout`` with ``T.Layout`` (shared tiles), ``T.Fragment``
(fragments) and ``make_swizzled_layout`` is what layout inference and the CUDA lowering use; the
meaning of the kernel does not change (cpu, cuda-emu, sm_80 / sm_90a compiles), and a layout an
op cannot work with is a located error naming both lines."""
from __future__ import annotations

import numpy as np
import pytest

import tegula
import tegula.language as T
from tegula.backends.cuda.compiler import available_backends
from tegula.layout import make_swizzled_layout
from tegula.layout.fragment import MmaLayout
from tegula.layout.user import SharedLayout, UserFragment
from tegula.tools.plot import fragment_holders, kernel_layouts, shared_offsets

ARCHS = ("sm_80", "sm_90a")


def run_everywhere(f, *arrays, out_shape, out_dtype=np.float32, plain=None):
    """Results of ``f`` on cpu and cuda-emu, which must agree bit for bit (for kernels with a
    tensor-core gemm, whose rounding order differs between the two, cuda-emu and
    cuda-emu:sm_90a must instead agree bit for bit with ``plain``, the kernel without the
    annotation); also compiled for both CUDA archs where a compiler exists."""
    if available_backends():
        for arch in ARCHS:
            assert "__global__" in tegula.compile(f, target=f"cuda:{arch}").get_kernel_source()

    def run(func, target):
        out = np.full(out_shape, np.nan, out_dtype)
        tegula.compile(func, target=target)(*arrays, out)
        return out

    emu = run(f, "cuda-emu")
    np.testing.assert_array_equal(emu, run(plain if plain is not None else f,
                                           "cuda-emu" if plain is not None else "cpu"))
    if plain is not None:  # the Hopper lowering (TMA stages, wgmma) keeps the layouts too
        np.testing.assert_array_equal(run(f, "cuda-emu:sm_90a"), run(plain, "cuda-emu:sm_90a"))
    return emu


# -- shared tiles: T.Layout ---------------------------------------------------------------------

def transposed_tile(M, N):
    @T.prim_func
    def k(X: T.Tensor((M, N), "float32"), Y: T.Tensor((N, M), "float32")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((M, N), "float32")
            T.annotate_layout({s: T.Layout((M, N), lambda i, j: (j, i))})
            T.copy(X, s)
            for j, i in T.Parallel(N, M):
                Y[j, i] = s[i, j] * 2.0 + 1.0

    return k


def test_shared_layout_is_where_the_lowering_puts_elements(rng):
    M, N = 16, 32
    x = rng.standard_normal((M, N)).astype(np.float32)
    y = run_everywhere(transposed_tile(M, N), x, out_shape=(N, M))
    np.testing.assert_allclose(y, x.T.astype(np.float64) * 2 + 1, rtol=1e-6)
    lay, eb = kernel_layouts(transposed_tile(M, N), target="cuda:sm_80")["s"]
    assert isinstance(lay, SharedLayout) and eb == 4
    # element (i, j) at offset j * M + i: the user's function, as tools.plot draws it
    np.testing.assert_array_equal(shared_offsets(lay), np.add.outer(np.arange(M), np.arange(N) * M))


def pipelined_gemm(layout_kind):
    M = N = K = 64

    @T.prim_func
    def k(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((M, 32), "float16")
            B_s = T.alloc_shared((32, N), "float16")
            C_l = T.alloc_fragment((M, N), "float32")
            if layout_kind == "swizzled":
                T.annotate_layout({A_s: make_swizzled_layout(A_s)})
            elif layout_kind == "chunks":  # whole 16-byte chunks of a row in reverse order
                T.annotate_layout({A_s: T.Layout((M, 32), lambda i, j: (i, (3 - j // 8) * 8 + j % 8))})
            elif layout_kind == "split":  # pairs of elements swapped: 16-byte rows broken up
                T.annotate_layout({A_s: T.Layout((M, 32), lambda i, j: (i, j // 2 + (j % 2) * 16))})
            T.clear(C_l)
            for ko in T.Pipelined(K // 32, num_stages=2):
                T.copy(A[0, ko * 32], A_s)
                T.copy(B[ko * 32, 0], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C)

    return k


@pytest.mark.parametrize("layout_kind", ["swizzled", "chunks"])
def test_layouts_of_pipelined_gemm_operands_are_kept(layout_kind, rng):
    a = rng.standard_normal((64, 64)).astype(np.float16)
    b = rng.standard_normal((64, 64)).astype(np.float16)
    c = run_everywhere(pipelined_gemm(layout_kind), a, b, out_shape=(64, 64), plain=pipelined_gemm(None))
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-3)
    lay, _ = kernel_layouts(pipelined_gemm(layout_kind), target="cuda:sm_80")["A_s"]
    assert tuple(lay.shape) == (2, 64, 32)  # the two pipeline stages, each laid out as given
    if layout_kind == "chunks":
        assert isinstance(lay, SharedLayout)
        np.testing.assert_array_equal(shared_offsets(lay)[5, :8], 5 * 32 + 24 + np.arange(8))


def test_layout_that_splits_ldmatrix_rows_names_both_lines():
    with pytest.raises(tegula.errors.LayoutError) as info:
        tegula.compile(pipelined_gemm("split"), target="cuda-emu")
    msg = str(info.value)
    assert "T.gemm (ldmatrix) reads 16-byte rows of 'A_s'" in msg
    assert "keeps only 2 consecutive bytes together" in msg
    assert "test_user_layouts.py:" in msg and "T.gemm(A_s, B_s, C_l)" in msg  # the gemm's line
    given = pipelined_gemm.__code__.co_firstlineno + 14  # the annotate_layout line of "split"
    assert f"test_user_layouts.py:{given}" in msg


def test_shared_layout_must_give_every_element_a_place():
    with pytest.raises(tegula.errors.LayoutError) as info:
        @T.prim_func
        def k(X: T.Tensor((8, 8), "float32")):
            with T.Kernel(1, threads=32):
                s = T.alloc_shared((8, 8), "float32")
                T.annotate_layout({s: T.Layout((8, 8), lambda i, j: (i // 2, j))})
                T.copy(X, s)
    msg = str(info.value)
    assert "puts elements (0, 0) and (1, 0) at one place (0)" in msg
    assert "T.annotate_layout({s: T.Layout((8, 8), lambda i, j: (i // 2, j))})" in msg
    with pytest.raises(tegula.errors.LayoutError, match=r"'s' \[8, 8\] is for shape \[8, 4\]"):
        @T.prim_func
        def k2(X: T.Tensor((8, 8), "float32")):
            with T.Kernel(1, threads=32):
                s = T.alloc_shared((8, 8), "float32")
                T.annotate_layout({s: T.Layout((8, 4), lambda i, j: (i, j))})


# -- fragments: T.Fragment ----------------------------------------------------------------------

def mma_spelled_out(i, j):
    """The m16n8 accumulator over 2 x 2 warps of a 64 x 64 tile, as (thread, register)."""
    warp = (i // 32) * 2 + j // 32
    lane = (i % 8) * 4 + (j % 8) // 2
    k = (((i % 32) // 16 * 4 + (j % 32) // 8) * 2 + (i % 16) // 8) * 2 + j % 2
    return warp * 32 + lane, k


def gemm_with_accumulator_layout(frag):
    @T.prim_func
    def k(A: T.Tensor((64, 32), "float16"), B: T.Tensor((32, 64), "float16"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((64, 32), "float16")
            B_s = T.alloc_shared((32, 64), "float16")
            C_l = T.alloc_fragment((64, 64), "float32")
            if frag is not None:
                T.annotate_layout({C_l: frag})
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, C_l, clear_accum=True)
            T.copy(C_l, C)

    return k


def test_fragment_equal_to_the_gemms_layout_is_accepted(rng):
    frag = T.Fragment((64, 64), forward_thread_fn=lambda i, j: mma_spelled_out(i, j)[0],
                      forward_index_fn=lambda i, j: mma_spelled_out(i, j)[1])
    a = rng.standard_normal((64, 32)).astype(np.float16)
    b = rng.standard_normal((32, 64)).astype(np.float16)
    c = run_everywhere(gemm_with_accumulator_layout(frag), a, b, out_shape=(64, 64),
                       plain=gemm_with_accumulator_layout(None))
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-4, atol=1e-3)


def test_fragment_that_conflicts_with_the_gemm_names_both_lines():
    frag = T.Fragment((64, 64), forward_thread_fn=lambda i, j: (i * 64 + j) % 128,
                      forward_index_fn=lambda i, j: (i * 64 + j) // 128)
    with pytest.raises(tegula.errors.LayoutError) as info:
        tegula.compile(gemm_with_accumulator_layout(frag), target="cuda-emu")
    msg = str(info.value)
    assert "'C_l' has the layout T.annotate_layout gives it at" in msg
    assert "this T.gemm needs its accumulator in MmaLayout(64, 64, 2, 2)" in msg
    assert "T.gemm(A_s, B_s, C_l, clear_accum=True)" in msg
    given = gemm_with_accumulator_layout.__code__.co_firstlineno + 8
    assert f"test_user_layouts.py:{given}" in msg


def fragment_kernel(frag):
    @T.prim_func
    def k(X: T.Tensor((32, 16), "float32"), Y: T.Tensor((32, 16), "float32")):
        with T.Kernel(1, threads=64):
            f = T.alloc_fragment((32, 16), "float32")
            T.annotate_layout({f: frag})
            T.copy(X, f)
            for i, j in T.Parallel(32, 16):
                f[i, j] = f[i, j] * f[i, j] - 3.0
            T.copy(f, Y)

    return k


def test_fragment_layout_is_how_the_tile_spreads_over_threads(rng):
    # column-major pairs: thread = (j * 32 + i) // 8 % 64, register = i % 8 ... written as bit fields
    th = lambda i, j: (j % 8) * 8 + i // 4  # noqa: E731
    ix = lambda i, j: (j // 8) * 4 + i % 4  # noqa: E731
    frag = T.Fragment((32, 16), forward_thread_fn=th, forward_index_fn=ix)
    x = rng.standard_normal((32, 16)).astype(np.float32)
    y = run_everywhere(fragment_kernel(frag), x, out_shape=(32, 16))
    np.testing.assert_allclose(y, x.astype(np.float64) ** 2 - 3, rtol=1e-6, atol=1e-6)
    lay, _ = kernel_layouts(fragment_kernel(frag), target="cuda:sm_80")["f"]
    assert isinstance(lay, UserFragment)
    holders = fragment_holders(lay)  # what tools.plot draws
    assert all(holders[(i, j)] == [(th(i, j), ix(i, j))] for i in range(32) for j in range(16))


def test_fragments_tegula_cannot_use_are_errors():
    with pytest.raises(tegula.errors.LayoutError, match=r"exactly one element"):
        fragment_kernel(T.Fragment((32, 16), forward_thread_fn=lambda i, j: (i * 2 + j // 8) % 64,
                                   forward_index_fn=lambda i, j: 0))
    with pytest.raises(tegula.errors.LayoutError, match=r"spreads it over 32 threads, the kernel has 64"):
        fragment_kernel(T.Fragment((32, 16), forward_thread_fn=lambda i, j: i,
                                   forward_index_fn=lambda i, j: j))
    with pytest.raises(tegula.errors.LayoutError, match=r"'X' is not a fragment"):
        @T.prim_func
        def k(X: T.Tensor((32, 16), "float32")):
            with T.Kernel(1, threads=64):
                T.annotate_layout({X: T.Fragment((32, 16), forward_thread_fn=lambda i, j: i * 2 + j // 8,
                                                 forward_index_fn=lambda i, j: j % 8)})


def test_user_fragment_inverse_by_bit_fields():
    frag = T.Fragment((16, 16), forward_thread_fn=lambda i, j: (i % 8) * 4 + (j % 8) // 2,
                      forward_index_fn=lambda i, j: (j // 8) * 4 + (i // 8) * 2 + j % 2)
    from tegula.backends.cuda.passes.layout_inference import same_placement

    u = UserFragment(frag)
    assert (u.threads, u.local_size, u.vec_width()) == (32, 8, 2)
    assert same_placement(u, MmaLayout(16, 16, 1, 1))


# -- T.Fragment(..., replicate=r): several threads hold each element -----------------------------

def replicated_kernel(frag, M=16, N=16):
    @T.prim_func
    def k(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M + 1, N), "float32")):
        with T.Kernel(1, threads=128):
            f = T.alloc_fragment((M, N), "float32")
            r = T.alloc_fragment((M,), "float32")
            s = T.alloc_shared((M, N), "float32")
            T.annotate_layout({f: frag})
            T.copy(X, f)
            for i, j in T.Parallel(M, N):
                f[i, j] = f[i, j] * 2.0 + 1.0
            T.reduce_sum(f, r, dim=1)
            T.copy(f, s)
            for i, j in T.Parallel(M, N):  # reads shared, writes it and a fragment
                s[i, j] = s[i, j] + f[i, j] * 0.5
                f[i, j] = f[i, j] - r[i]
            T.copy(s, Y[0:M, 0:N])
            for i in T.Parallel(M):
                Y[M, i] = f[i, 0] + f[i, N - 1]

    return k


REPLICATED = {
    # the two replicas of an element in the two halves of the block
    "halves": T.Fragment((16, 16), forward_thread_fn=lambda i, j, rep: rep * 64 + (i * 16 + j) // 4,
                         replicate=2, forward_index_fn=lambda i, j: (i * 16 + j) % 4),
    # neighbouring threads, four replicas
    "neighbours": T.Fragment((16, 16), forward_thread_fn=lambda i, j, rep: ((i * 16 + j) // 8) * 4 + rep,
                             replicate=4, forward_index_fn=lambda i, j: j % 8),
}


@pytest.mark.parametrize("name", list(REPLICATED))
def test_replicated_fragment_runs_alike_everywhere(name, rng):
    frag = REPLICATED[name]
    x = rng.standard_normal((16, 16)).astype(np.float32)
    f = x.astype(np.float64) * 2 + 1
    r = f.sum(axis=1)
    for target in ("cpu", "cuda-emu", "cuda-emu:sm_90a"):  # the sums' order differs: not bitwise
        y = np.full((17, 16), np.nan, np.float32)
        tegula.compile(replicated_kernel(frag), target=target)(x, y)
        np.testing.assert_allclose(y[:16], f * 1.5, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(y[16], (f[:, 0] - r) + (f[:, 15] - r), rtol=1e-5, atol=1e-4)
    if available_backends():
        for arch in ARCHS:
            assert "__global__" in tegula.compile(replicated_kernel(frag), target=f"cuda:{arch}").get_kernel_source()
    lay, _ = kernel_layouts(replicated_kernel(frag), target="cuda:sm_80")["f"]
    assert isinstance(lay, UserFragment) and lay.threads == 128
    holders = fragment_holders(lay)
    assert all(len(holders[(i, j)]) == frag.replicate for i in range(16) for j in range(16))
    # only one replica writes memory: the lowered code tests the replica bits
    src = tegula.compile(replicated_kernel(frag), target="cuda:sm_80").get_kernel_source()
    assert ("(tx & 64) == 0" if name == "halves" else "(tx & 3) == 0") in src


def test_replicated_fragment_thread_function_takes_the_replica_index():
    frag = REPLICATED["halves"]
    assert frag.get_thread_size() == 128 and frag.map_forward_thread((1, 0, 1)) == 64 + 4
    assert "replicate=2" in frag.describe() and "lambda i0, i1, rep" in frag.describe()
    both = T.Fragment((16, 16), forward_fn=lambda i, j, rep: (rep * 64 + (i * 16 + j) // 4, (i * 16 + j) % 4),
                      replicate=2)
    assert UserFragment(both).key() == UserFragment(frag).key()
    with pytest.raises(tegula.errors.KernelTypeError, match="cannot depend on the replica index"):
        T.Fragment((16, 16), forward_fn=lambda i, j, rep: (i, j + rep), replicate=2)


def test_replicated_fragments_tegula_cannot_use_are_errors():
    with pytest.raises(tegula.errors.KernelTypeError, match="must take 3 index argument"):
        T.Fragment((16, 16), forward_thread_fn=lambda i, j: i, replicate=2, forward_index_fn=lambda i, j: j)
    # the replicas of an element collide on one thread
    with pytest.raises(tegula.errors.LayoutError, match="2 \\(thread, register\\) pairs of its own"):
        replicated_kernel(T.Fragment((16, 16), forward_thread_fn=lambda i, j, rep: (i * 16 + j) // 2,
                                     replicate=2, forward_index_fn=lambda i, j: j % 2))
    # replicas at threads that no bit fields of the thread index give
    with pytest.raises(tegula.errors.LayoutError, match="cannot invert this layout.*replicate=2"):
        replicated_kernel(T.Fragment(
            (16, 16), forward_thread_fn=lambda i, j, rep: ((i * 16 + j) // 4 + rep * 3) % 64 + (rep * 64),
            replicate=2, forward_index_fn=lambda i, j: (i * 16 + j) % 4))
