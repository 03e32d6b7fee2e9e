"""TileLang's CUDA-dialect names (tegula/language/dialect.py): warp exchange and votes, lane and
warp indices, math, fast-math and bitwise names; each against a float64 / numpy reference on every
target (and compiled for both CUDA archs where a compiler is present)."""
from __future__ import annotations

import numpy as np
import pytest

import tegula
import tegula.language as T
from tests.language.test_features import built, target, to_device, to_host  # noqa: F401 (fixture)


def _warp_kernel():
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), S: T.Tensor((64,), "float32"), M: T.Tensor((64,), "float32"),
             X: T.Tensor((64,), "float32"), D: T.Tensor((64,), "float32"), U: T.Tensor((64,), "float32"),
             V: T.Tensor((64,), "int32"), L: T.Tensor((64,), "int32")):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            S[tx] = T.warp_reduce_sum(A[tx])
            M[tx] = T.warp_reduce_max(A[tx]) - T.warp_reduce_min(A[tx])
            X[tx] = T.shfl_sync(A[tx], 5, 16)
            D[tx] = T.shfl_down(A[tx], 3)
            U[tx] = T.shfl_up(A[tx], 2, 8)
            T.sync_warp()
            V[tx] = T.any_sync(A[tx] > 1.0) * 4 + T.all_sync(A[tx] > -10.0) * 2 + T.shuffle_elect(32)
            L[tx] = T.get_lane_idx() + T.get_warp_idx() * 100 + T.get_warp_group_idx() * 1000
    return main


def test_warp_level_names(target, rng):
    k = built(_warp_kernel(), target, out_idx=[1, 2, 3, 4, 5, 6, 7])
    a = rng.standard_normal(64).astype(np.float32)
    s, m, x, d, u, v, lane = (to_host(o) for o in k(*to_device(target, a)))
    w = a.astype(np.float64).reshape(2, 32)
    np.testing.assert_allclose(s, np.repeat(w.sum(1), 32), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(m, np.repeat(w.max(1) - w.min(1), 32), rtol=1e-6)
    i = np.arange(64)
    ln = i % 32
    np.testing.assert_array_equal(x, a[i - ln % 16 + 5])
    src_d = np.where(ln + 3 < 32, i + 3, i)
    np.testing.assert_array_equal(d, a[src_d])
    src_u = np.where(ln % 8 >= 2, i - 2, i)
    np.testing.assert_array_equal(u, a[src_u])
    anyw = np.repeat((w > 1.0).any(1), 32)
    np.testing.assert_array_equal(v, anyw * 4 + 2 + (ln == 0))
    np.testing.assert_array_equal(lane, ln + (i // 32) * 100)


def test_ballot(target, rng):
    @T.prim_func
    def main(A: T.Tensor((32,), "int32"), B: T.Tensor((32,), "int64")):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            B[tx] = T.Cast("int64", T.ballot_sync(A[tx] > 0))

    k = built(main, target, out_idx=[1])
    a = rng.integers(-3, 3, 32).astype(np.int32)
    (b,) = [to_host(k(*to_device(target, a)))]
    want = sum(1 << j for j in range(32) if a[j] > 0)
    assert (b == want).all()


def test_warp_names_need_thread_level_code():
    with pytest.raises(tegula.errors.TegulaError, match="T.warp_reduce_sum") as e:
        @T.prim_func
        def bad(A: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64):
                for i in T.Parallel(64):
                    A[i] = T.warp_reduce_sum(A[i])
    assert "A[i] = T.warp_reduce_sum(A[i])" in str(e.value)


def test_math_fast_math_and_bitwise(target, rng):
    @T.prim_func
    def main(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32"), I: T.Tensor((128,), "int32"),
             O: T.Tensor((12, 128), "float32"), P: T.Tensor((4, 128), "int32")):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(128):
                O[0, i] = T.atan2(A[i], B[i])
                O[1, i] = T.hypot(A[i], B[i])
                O[2, i] = T.sinh(A[i]) + T.cosh(B[i])
                O[3, i] = T.asin(A[i] * 0.5) + T.acos(B[i] * 0.5) + T.atan(A[i])
                O[4, i] = T.__exp(A[i]) + T.__log(T.fabs(B[i]) + 1.0)
                O[5, i] = T.__sin(A[i]) * T.__cos(B[i]) + T.__tan(A[i] * 0.1)
                O[6, i] = T.copysign(A[i], B[i]) + T.ldexp(A[i], 3)
                O[7, i] = T.fma(A[i], B[i], 1.0) + T.fmul(A[i], 2.0)
                O[8, i] = T.__exp10(A[i] * 0.1) + T.__log2(T.fabs(A[i]) + 1.0) + T.__log10(T.fabs(B[i]) + 1.0)
                O[9, i] = T.ieee_add(A[i], B[i]) + T.ieee_fdiv(A[i], 2.0) + T.fast_rcp(B[i] * B[i] + 1.0)
                O[10, i] = T.asinh(A[i]) + T.atanh(A[i] * 0.1) + T.acosh(T.fabs(B[i]) + 1.0)
                O[11, i] = T.nearbyint(A[i] * 4.0)
                P[0, i] = T.bitwise_and(I[i], 12) + T.bitwise_or(I[i], 3)
                P[1, i] = T.bitwise_xor(I[i], 255)
                P[2, i] = T.bitwise_not(I[i])
                P[3, i] = T.align_up(I[i], 64) + T.cdiv(I[i], 8)
    k = built(main, target, out_idx=[3, 4])
    a = rng.uniform(-1.9, 1.9, 128).astype(np.float32)  # asin(a / 2), acos(b / 2) defined
    b = rng.uniform(-1.9, 1.9, 128).astype(np.float32)
    iv = rng.integers(0, 1000, 128).astype(np.int32)
    o, p = (to_host(x) for x in k(*to_device(target, a, b, iv)))
    A, B = a.astype(np.float64), b.astype(np.float64)
    want = [np.arctan2(A, B), np.hypot(A, B), np.sinh(A) + np.cosh(B),
            np.arcsin(A * .5) + np.arccos(B * .5) + np.arctan(A), np.exp(A) + np.log(abs(B) + 1),
            np.sin(A) * np.cos(B) + np.tan(A * .1), np.copysign(A, B) + A * 8, A * B + 1 + 2 * A,
            10 ** (A * .1) + np.log2(abs(A) + 1) + np.log10(abs(B) + 1), A + B + A / 2 + 1 / (B * B + 1),
            np.arcsinh(A) + np.arctanh(A * .1) + np.arccosh(abs(B) + 1), np.rint(A * 4)]
    for r, w in enumerate(want):
        assert np.isfinite(w).all()
        np.testing.assert_allclose(o[r], w, rtol=2e-5, atol=2e-5, err_msg=f"row {r}")
    np.testing.assert_array_equal(p[0], (iv & 12) + (iv | 3))
    np.testing.assert_array_equal(p[1], iv ^ 255)
    np.testing.assert_array_equal(p[2], ~iv)
    np.testing.assert_array_equal(p[3], -(-iv // 64) * 64 + -(-iv // 8))


def test_host_helpers():
    assert T.cdiv(100, 64) == 2 and T.align_up(100, 64) == 128 and T.bitwise_and(6, 3) == 2
    assert T.short == "int16" and T.long == "int64"
    assert T.is_float4("float4_e2m1fn") and not T.is_float4("float16")
    assert T.is_f8f6f4_family(T.float8_e4m3) and not T.is_float4_e2m1_unpacked("float4_e2m1fn")


def test_dynamic_of_several_names(rng):
    M, N = T.dynamic("M, N")
    assert (M.name, N.name) == ("M", "N")

    @T.prim_func
    def twice(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, 32), threads=128) as bx:
            for j in T.serial(N):
                for i in T.Parallel(32):
                    B[bx * 32 + i, j] = A[bx * 32 + i, j] * 2.0

    a = rng.standard_normal((40, 8)).astype(np.float32)
    b = np.zeros_like(a)
    tegula.compile(twice, target="cpu")(a, b)
    np.testing.assert_allclose(b, a.astype(np.float64) * 2)


def test_atomic_add_return_prev(target, rng):
    """Each thread's T.atomic_add(..., return_prev=True) returns the count before its own update,
    so the positive elements' threads get the slots 0..n-1 (a stream compaction)."""
    @T.prim_func
    def compact(A: T.Tensor((64,), "int32"), P: T.Tensor((64,), "int32"), C: T.Tensor((1,), "int32")):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            S = T.alloc_shared((1,), "int32")
            if tx == 0:
                S[0] = 0
            T.sync_threads()
            if A[tx] > 0:
                pos = T.atomic_add(S[0], 1, return_prev=True)
                P[pos] = tx
            T.sync_threads()
            if tx == 0:
                C[0] = S[0]

    k = built(compact, target)
    a = rng.integers(-3, 3, 64).astype(np.int32)
    p, c = np.full(64, -1, np.int32), np.zeros(1, np.int32)
    dp, dc = to_device(target, p, c)
    k(*to_device(target, a), dp, dc)
    p, c = to_host(dp), to_host(dc)
    n = int((a > 0).sum())
    assert c[0] == n and sorted(p[:n].tolist()) == np.flatnonzero(a > 0).tolist() and (p[n:] == -1).all()


def test_atomic_return_prev_needs_thread_level_code():
    with pytest.raises(tegula.errors.ScopeError, match="return_prev=True") as e:
        @T.prim_func
        def bad(A: T.Tensor((64,), "int32")):
            with T.Kernel(1, threads=64):
                S = T.alloc_shared((1,), "int32")
                p = T.atomic_add(S[0], 1, return_prev=True)
                A[0] = p
    assert "p = T.atomic_add(S[0], 1, return_prev=True)" in str(e.value)


def test_clamp_keywords_cumsum_annotations_and_dtype_bytes(target, rng):
    @T.prim_func
    def main(A: T.Tensor((128,), "float32"), C: T.Tensor((128,), "float32"), S: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((128,), "float32")
            for i in T.Parallel(128):
                C[i] = T.clamp(A[i], min_val=-0.5, max_val=0.5)
            T.copy(A, s)
            T.cumsum(s, dim=0, annotations={"tl.scan_hint": 1})
            T.copy(s, S)

    k = built(main, target, out_idx=[1, 2])
    a = rng.standard_normal(128).astype(np.float32)
    c, s = (to_host(x) for x in k(*to_device(target, a)))
    np.testing.assert_array_equal(c, np.clip(a, -0.5, 0.5))
    np.testing.assert_allclose(s, np.cumsum(a.astype(np.float64)), rtol=1e-5, atol=1e-5)
    assert (T.float16.bytes, T.float32.bytes, T.float8_e4m3.bytes, T.int64.bytes) == (2, 4, 1, 8)


def test_break_and_continue_whose_condition_differs_between_threads(target, rng):
    """Each thread leaves the loop at its own iteration (a GPU thread's `break`)."""
    @T.prim_func
    def main(L: T.Tensor((64,), "int32"), O: T.Tensor((64,), "int32")):
        with T.Kernel(1, threads=64):
            tx = T.get_thread_binding()
            acc = T.alloc_var(T.int32, init=0)
            lim = L[tx]
            for r in T.serial(10):
                if r >= lim:
                    break
                if r % 3 == tx % 3:
                    continue
                acc = acc + r + 1
            O[tx] = acc

    k = built(main, target, out_idx=[1])
    lim = rng.integers(0, 12, 64).astype(np.int32)
    o = to_host(k(*to_device(target, lim)))
    want = [sum(r + 1 for r in range(min(int(lim[t]), 10)) if r % 3 != t % 3) for t in range(64)]
    np.testing.assert_array_equal(o, want)


def test_tir_if_then_else_frames(target, rng):
    @T.prim_func
    def main(A: T.Tensor((128,), "float32"), B: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(128):
                with T.If(A[i] > 0):
                    with T.Then():
                        B[i] = A[i] * 2.0
                    with T.Else():
                        B[i] = -1.0

    k = built(main, target, out_idx=[1])
    a = rng.standard_normal(128).astype(np.float32)
    np.testing.assert_array_equal(to_host(k(*to_device(target, a))), np.where(a > 0, a * 2, -1))


def test_tir_if_needs_then():
    with pytest.raises(tegula.errors.KernelSyntaxError, match="T.Then") as e:
        @T.prim_func
        def bad(A: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=128):
                for i in T.Parallel(128):
                    with T.If(A[i] > 0):
                        A[i] = 0.0
    assert "A[i] = 0.0" in str(e.value)


def test_loop_break_and_continue_loop(target, rng):
    @T.prim_func
    def main(A: T.Tensor((16,), "int32"), O: T.Tensor((1,), "int32")):
        with T.Kernel(1, threads=32):
            acc = T.alloc_var(T.int32, init=0)
            for i in T.serial(16):
                if A[i] < 0:
                    T.loop_break()
                if A[i] % 2 == 1:
                    T.continue_loop()
                acc = acc + A[i]
            O[0] = acc

    k = built(main, target, out_idx=[1])
    a = rng.integers(0, 9, 16).astype(np.int32)
    a[11] = -1
    want = sum(int(x) for x in a[:11] if x % 2 == 0)
    assert to_host(k(*to_device(target, a)))[0] == want
    with pytest.raises(tegula.errors.KernelSyntaxError, match="outside a kernel loop"):
        @T.prim_func
        def bad(A: T.Tensor((16,), "int32")):
            with T.Kernel(1, threads=32):
                T.loop_break()


def _ws_gemm(mode):
    @T.prim_func
    def g(A: T.Tensor((256, 512), "float16"), B: T.Tensor((512, 512), "float16"), C: T.Tensor((256, 512), "float32")):
        with T.Kernel(4, 4, threads=128) as (bx, by):
            As = T.alloc_shared((64, 64), "float16")
            Bs = T.alloc_shared((64, 128), "float16")
            Cl = T.alloc_fragment((64, 128), "float32")
            if mode == "off":
                T.disable_warp_group_reg_alloc()
            if mode == "given":
                T.annotate_producer_reg_dealloc(24)
                T.annotate_consumer_reg_alloc(240)
            T.clear(Cl)
            for k in T.Pipelined(8, num_stages=3):
                T.copy(A[by * 64, k * 64], As)
                T.copy(B[k * 64, bx * 128], Bs)
                T.gemm(As, Bs, Cl)
            T.copy(Cl, C[by * 64, bx * 128])
    return g


@pytest.mark.skipif(not __import__("tegula.backends.cuda.compiler", fromlist=["x"]).available_backends(),
                    reason="needs a CUDA compiler (NVRTC or nvcc)")
def test_register_budget_hints_of_warp_specialized_kernels(rng):
    src = {m: tegula.compile(_ws_gemm(m), target="cuda:sm_90a").get_kernel_source() for m in ("default", "off", "given")}
    assert "warpgroup_reg_dealloc<40>" in src["default"] and "warpgroup_reg_alloc<232>" in src["default"]
    assert "warpgroup_reg_alloc" not in src["off"] and "warpgroup_reg_dealloc" not in src["off"]
    assert "warpgroup_reg_dealloc<24>" in src["given"] and "warpgroup_reg_alloc<240>" in src["given"]
    a = rng.standard_normal((256, 512)).astype(np.float16)
    b = rng.standard_normal((512, 512)).astype(np.float16)
    for m in ("off", "given"):  # the same product on the sm_90a emulator
        c = np.zeros((256, 512), np.float32)
        tegula.compile(_ws_gemm(m), target="cuda-emu:sm_90a")(a, b, c)
        np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64), rtol=1e-3, atol=1e-2)


def test_thread_and_block_extents(target):
    @T.prim_func
    def main(O: T.Tensor((3, 8), "int32")):
        with T.Kernel(3, 2, threads=(64, 2)) as (bx, by):
            gx, gy, gz = T.get_block_extents()
            tx, ty, tz = T.get_thread_extents()
            if bx == 0 and by == 0:
                for i in T.Parallel(3):
                    O[i, 0] = gx * 100 + gy * 10 + gz
                    O[i, 1] = T.get_block_extent(0) + T.get_thread_extent(0) + tx * 0 + ty + tz
            for i in T.Parallel(3):
                O[i, 2 + bx * 2 + by] = bx * 10 + by

    k = built(main, target, out_idx=[0])
    o = to_host(k())
    assert (o[:, 0] == 321).all() and (o[:, 1] == 3 + 64 + 2 + 1).all()
    assert [int(o[0, 2 + x * 2 + y]) for x in range(3) for y in range(2)] == [x * 10 + y for x in range(3) for y in range(2)]


def _assert_kernel():
    @T.prim_func
    def main(A: T.Tensor((128,), "int32"), B: T.Tensor((128,), "int32")):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(128):
                T.device_assert(A[i] < 100, "A holds an index past 100")
                B[i] = A[i] + 1
    return main


def test_device_assert(target, rng):
    k = built(_assert_kernel(), target, out_idx=[1])
    a = rng.integers(0, 100, 128).astype(np.int32)
    np.testing.assert_array_equal(to_host(k(*to_device(target, a))), a + 1)
    if target != "cuda":
        a[77] = 100
        with pytest.raises(tegula.errors.DeviceAssertError, match="A holds an index past 100") as e:
            k(*to_device(target, a))
        assert 'T.device_assert(A[i] < 100, "A holds an index past 100")' in str(e.value)


def test_atomic_addx2_x4(target, rng):
    @T.prim_func
    def main(V: T.Tensor((64, 8), "float32"), X: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=64):
            for i in T.Parallel(64):
                T.atomic_addx4(X[0], V[i, 0])
                T.atomic_addx2(X[4], V[i, 4])
                T.atomic_addx2(X[6], V[i, 6])

    k = built(main, target)
    v = rng.standard_normal((64, 8)).astype(np.float32)
    x = np.zeros(8, np.float32)
    dv, dx = to_device(target, v, x)
    k(dv, dx)
    np.testing.assert_allclose(to_host(dx), v.astype(np.float64).sum(0), rtol=1e-5, atol=1e-5)


def test_view_with_another_dtype_of_the_same_width(target, rng):
    @T.prim_func
    def main(A: T.Tensor((128,), "float32"), B: T.Tensor((4, 32), "int32"), C: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((128,), "float32")
            T.copy(A, s)
            bits = T.view(s, (4, 32), "int32")
            T.copy(bits, B)
            for i in T.Parallel(128):
                bits[i // 32, i % 32] = T.bitwise_xor(bits[i // 32, i % 32], -2147483648)  # flip the sign bit
            T.copy(s, C)

    k = built(main, target, out_idx=[1, 2])
    a = rng.standard_normal(128).astype(np.float32)
    b, c = (to_host(x) for x in k(*to_device(target, a)))
    np.testing.assert_array_equal(b.reshape(-1), a.view(np.int32))
    np.testing.assert_array_equal(c, -a)
    with pytest.raises(tegula.errors.UnsupportedError, match="same width"):
        @T.prim_func
        def bad(A: T.Tensor((128,), "float32")):
            with T.Kernel(1, threads=128):
                s = T.alloc_shared((128,), "float32")
                v = T.view(s, (256,), "float16")


def test_reshape_of_a_fragment(target, rng):
    @T.prim_func
    def main(A: T.Tensor((128,), "float32"), B: T.Tensor((4, 32), "float32"), R: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=128):
            f = T.alloc_fragment((128,), "float32")
            r = T.alloc_fragment((4,), "float32")
            T.copy(A, f)
            g = T.reshape(f, (4, 32))
            for i, j in T.Parallel(4, 32):
                g[i, j] = g[i, j] * 2.0
            T.copy(g, B)
            for i in T.Parallel(4):
                r[i] = g[i, 0] + g[i, 31]
            T.copy(r, R)

    k = built(main, target, out_idx=[1, 2])
    a = rng.standard_normal(128).astype(np.float32)
    b, r = (to_host(x) for x in k(*to_device(target, a)))
    np.testing.assert_array_equal(b, (a * 2).reshape(4, 32))
    np.testing.assert_allclose(r, (a * 2).reshape(4, 32)[:, [0, 31]].sum(1), rtol=1e-6)


@T.macro
def _bump_ref(x: T.Ref, d):
    x = x + d


@T.macro
def _bump_value(x, d):
    x = x + d
    return x


def test_ref_macro_parameters(target):
    @T.prim_func
    def main(A: T.Tensor((4,), "int32")):
        with T.Kernel(1, threads=32):
            s = T.alloc_shared((4,), "int32")
            v = T.alloc_var(T.int32, init=1)
            for i in T.serial(4):
                s[i] = i
            _bump_ref(s[1], 7)       # by reference: s[1] becomes 8
            _bump_value(s[2], 7)     # by value: s[2] stays 2
            _bump_ref(v, 5)          # a variable: v becomes 6
            A[0] = v
            A[1] = s[1]
            A[2] = s[2]
            A[3] = s[3]

    k = built(main, target, out_idx=[0])
    np.testing.assert_array_equal(to_host(k()), [6, 8, 2, 3])


def test_gemm_clear_accum_known_when_the_kernel_runs(target, rng):
    """``clear_accum=k == 0`` (TileLang's form): the first k-step starts from zero."""
    @T.prim_func
    def main(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            As = T.alloc_shared((64, 32), "float16")
            Bs = T.alloc_shared((64, 32), "float16")
            Cf = T.alloc_fragment((64, 64), "float32")
            T.fill(Cf, 1000.0)  # stale values the first step must drop
            for k in T.Pipelined(2, num_stages=2):
                T.copy(A[0, k * 32], As)
                T.copy(B[0, k * 32], Bs)
                T.gemm(As, Bs, Cf, transpose_B=True, clear_accum=k == 0)
            T.copy(Cf, C)

    k = built(main, target, out_idx=[2])
    a = rng.standard_normal((64, 64)).astype(np.float16)
    b = rng.standard_normal((64, 64)).astype(np.float16)
    c = to_host(k(*to_device(target, a, b)))
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64).T, rtol=1e-2, atol=1e-2)


def _tcgen05_kernel():
    @T.prim_func
    def main(A: T.Tensor((128, 64), "bfloat16"), B: T.Tensor((128, 64), "bfloat16"), C: T.Tensor((128, 128), "float32")):
        with T.Kernel(1, threads=128):
            As = T.alloc_shared((128, 32), "bfloat16")
            Bs = T.alloc_shared((128, 32), "bfloat16")
            Ct = T.alloc_tmem([128, 128], "float32")
            mbar = T.alloc_barrier(1)
            Cf = T.alloc_fragment((128, 128), "float32")
            for k in T.Pipelined(2, num_stages=2):
                T.copy(A[0, k * 32], As)
                T.copy(B[0, k * 32], Bs)
                T.tcgen05_gemm(As, Bs, Ct, False, True, mbar=mbar, clear_accum=k == 0)
                T.mbarrier_wait_parity(mbar, k % 2)
            T.copy(Ct, Cf)
            T.copy(Cf, C)
    return main


def test_blackwell_tmem_gemm_has_tile_semantics_on_cpu(rng):
    import ml_dtypes

    a = rng.standard_normal((128, 64)).astype(ml_dtypes.bfloat16)
    b = rng.standard_normal((128, 64)).astype(ml_dtypes.bfloat16)
    c = np.zeros((128, 128), np.float32)
    tegula.compile(_tcgen05_kernel(), target="cpu")(a, b, c)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b.astype(np.float64).T, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("tgt", ["cuda-emu", "cuda-emu:sm_90a", "cuda:sm_80", "cuda:sm_90a"])
def test_blackwell_names_need_sm_100_on_older_cuda_archs(tgt):
    with pytest.raises(tegula.errors.UnsupportedError, match="T.alloc_tmem needs sm_100") as e:
        tegula.compile(_tcgen05_kernel(), target=tgt)
    assert 'Ct = T.alloc_tmem([128, 128], "float32")' in str(e.value)


def test_fp8_tiles_of_many_blocks(rng):
    """An fp8-in, fp8-out gemm over 64 blocks that the interpreter runs side by side (the shape of
    the corpus's gemm_fp8, whose batched tile windows failed with "data type '<f1' not
    understood" before they were taken over the array's bits; this test guards the result, the
    corpus call reproduces the failure)."""
    @T.prim_func
    def main(A: T.Tensor((1024, 128), "float8_e4m3"), B: T.Tensor((1024, 128), "float8_e4m3"),
             C: T.Tensor((1024, 1024), "float8_e4m3")):
        with T.Kernel(8, 8, threads=128) as (bx, by):
            a = T.alloc_shared((128, 64), "float8_e4m3")
            b = T.alloc_shared((128, 64), "float8_e4m3")
            c = T.alloc_fragment((128, 128), "float32")
            T.clear(c)
            for k in T.Pipelined(2, num_stages=3):
                T.copy(A[by * 128, k * 64], a)
                T.copy(B[bx * 128, k * 64], b)
                T.gemm(a, b, c, transpose_B=True)
            T.copy(c, C[by * 128, bx * 128])

    torch = pytest.importorskip("torch")
    a = torch.from_numpy(rng.standard_normal((1024, 128)).astype(np.float32)).to(torch.float8_e4m3fn)
    b = torch.from_numpy(rng.standard_normal((1024, 128)).astype(np.float32)).to(torch.float8_e4m3fn)
    c = torch.zeros((1024, 1024), dtype=torch.float8_e4m3fn)
    tegula.compile(main, target="cpu")(a, b, c)
    want = torch.from_numpy(a.to(torch.float64).numpy() @ b.to(torch.float64).numpy().T).to(torch.float8_e4m3fn)
    np.testing.assert_array_equal(c.to(torch.float32).numpy(), want.to(torch.float32).numpy())
