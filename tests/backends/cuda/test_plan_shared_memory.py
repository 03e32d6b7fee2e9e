"""PlanSharedMemory: shared buffers whose lifetimes do not overlap share bytes, on every path a
barrier between them (inserted where none was), and the kernels compute the same."""
import numpy as np
import pytest

import tegula
import tegula.language as T
from tegula.backends.cuda.analysis.shared_access import is_sync
from tegula.backends.cuda.pipeline import lower
from tegula.ir.stmt import Kernel
from tegula.target import Target

SM80 = Target("cuda", "sm_80")
SM90 = Target("cuda", "sm_90a")
NO_REUSE = {tegula.PassConfigKey.TL_DISABLE_SHARED_MEMORY_REUSE: True}


def kernel_of(func):
    body = func.body
    return body if isinstance(body, Kernel) else body.stmts[0]


def offsets(func, target=SM80, cfg=None):
    k = kernel_of(lower(func, target, cfg or {}))
    return {b.name: (o, b.nbytes()) for b, o in k.annotations["smem_offsets"].items()}, k


def overlaps(off, a, b):
    (oa, na), (ob, nb) = off[a], off[b]
    return oa < ob + nb and ob < oa + na


def decode(heads=16, seq=256, dim=64, pe=32, block_N=32, stages=2, threads=128):
    """Attention of a block of query heads over one shared K/V (the shape of MLA decoding): Q and
    the K/V tiles live through the loop, O_s only after it."""
    scale = (dim + pe) ** -0.5 * 1.44269504

    @T.prim_func
    def decode_kernel(Q: T.Tensor((heads, dim), "float16"), Q_pe: T.Tensor((heads, pe), "float16"),
                      KV: T.Tensor((seq, dim), "float16"), K_pe: T.Tensor((seq, pe), "float16"),
                      Out: T.Tensor((heads, dim), "float16")):
        with T.Kernel(1, threads=threads) as bx:
            Q_s = T.alloc_shared((heads, dim), "float16")
            Qp_s = T.alloc_shared((heads, pe), "float16")
            KV_s = T.alloc_shared((block_N, dim), "float16")
            Kp_s = T.alloc_shared((block_N, pe), "float16")
            S_s = T.alloc_shared((heads, block_N), "float16")
            O_s = T.alloc_shared((heads, dim), "float16")
            acc_s = T.alloc_fragment((heads, block_N), "float32")
            acc_o = T.alloc_fragment((heads, dim), "float32")
            m = T.alloc_fragment((heads,), "float32")
            m_prev = T.alloc_fragment((heads,), "float32")
            r = T.alloc_fragment((heads,), "float32")
            ssum = T.alloc_fragment((heads,), "float32")
            lsum = T.alloc_fragment((heads,), "float32")
            T.copy(Q, Q_s)
            T.copy(Q_pe, Qp_s)
            T.fill(acc_o, 0)
            T.fill(lsum, 0)
            T.fill(m, -T.infinity("float32"))
            for k in T.Pipelined(seq // block_N, num_stages=stages):
                T.copy(KV[k * block_N, 0], KV_s)
                T.copy(K_pe[k * block_N, 0], Kp_s)
                T.gemm(Q_s, KV_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullCol, clear_accum=True)
                T.gemm(Qp_s, Kp_s, acc_s, transpose_B=True, policy=T.GemmWarpPolicy.FullCol)
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(heads):
                    r[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                for i, j in T.Parallel(heads, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale - m[i] * scale)
                T.reduce_sum(acc_s, ssum, dim=1)
                T.copy(acc_s, S_s)
                for i in T.Parallel(heads):
                    lsum[i] = lsum[i] * r[i] + ssum[i]
                for i, j in T.Parallel(heads, dim):
                    acc_o[i, j] *= r[i]
                T.gemm(S_s, KV_s, acc_o, policy=T.GemmWarpPolicy.FullCol)
            for i, j in T.Parallel(heads, dim):
                acc_o[i, j] /= lsum[i]
            T.copy(acc_o, O_s)
            T.copy(O_s, Out)

    return decode_kernel


def decode_reference(q, qp, kv, kp):
    q, qp, kv, kp = (x.astype(np.float64) for x in (q, qp, kv, kp))
    s = (q @ kv.T + qp @ kp.T) * (q.shape[1] + qp.shape[1]) ** -0.5
    p = np.exp(s - s.max(1, keepdims=True))
    return (p / p.sum(1, keepdims=True)) @ kv


def test_a_buffer_used_after_a_loop_takes_the_bytes_of_one_used_in_it():
    off, k = offsets(decode())
    assert overlaps(off, "O_s", "Q_s") or overlaps(off, "O_s", "KV_s")
    # the loop's buffers never share with each other, nor with what is live beside them
    live_in_loop = ["Q_s", "Qp_s", "KV_s", "Kp_s", "S_s"]
    for i, a in enumerate(live_in_loop):
        for b in live_in_loop[i + 1:]:
            assert not overlaps(off, a, b), (a, b)
    # merging O_s needs a barrier after the loop: the planner put one in front of O_s's copy
    stmts = k.body.stmts
    first_o = next(i for i, s in enumerate(stmts) if "O_s" in repr(s))
    assert is_sync(stmts[first_o - 1])
    assert not any(is_sync(s) for s in offsets(decode(), cfg=NO_REUSE)[1].body.stmts[first_o - 4:first_o])


def test_reduction_scratch_inside_a_loop_is_shared_between_reductions():
    off, _ = offsets(decode())
    parts = [n for n in off if n.startswith("red_part")]
    assert len(parts) == 2 and off[parts[0]][0] == off[parts[1]][0]


def test_no_reuse_gives_every_buffer_its_own_bytes():
    off, k = offsets(decode(), cfg=NO_REUSE)
    names = list(off)
    assert not any(overlaps(off, a, b) for i, a in enumerate(names) for b in names[i + 1:])
    shared_k = offsets(decode())[1]
    assert shared_k.annotations["smem_bytes"] < k.annotations["smem_bytes"]


@pytest.mark.parametrize("stages", [1, 2, 3])
def test_shared_bytes_compute_the_same_on_the_emulator(rng, stages):
    """The emulator lays shared memory out as planned and reports any race the sharing causes."""
    q = rng.standard_normal((16, 64)).astype(np.float16)
    qp = rng.standard_normal((16, 32)).astype(np.float16)
    kv = rng.standard_normal((256, 64)).astype(np.float16)
    kp = rng.standard_normal((256, 32)).astype(np.float16)
    ref = decode_reference(q, qp, kv, kp)
    for target in ("cpu", "cuda-emu"):
        out = tegula.compile(decode(stages=stages), out_idx=[-1], target=target)(q, qp, kv, kp)
        np.testing.assert_allclose(out.astype(np.float64), ref, rtol=2e-2, atol=2e-2)


def test_mla_decode_sized_tiles_fit_sm90a():
    """64 heads x 512 + 64 dims against 64-row K/V tiles in two stages: 300 KB without sharing,
    within sm_90a's 227 KB with it (O_s reuses a tile that is dead after the loop, the two
    reductions' partials share)."""
    k = kernel_of(lower(decode(heads=64, seq=8192, dim=512, pe=64, block_N=64, stages=2, threads=256), SM90, {}))
    assert k.annotations["smem_bytes"] <= 232448


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_shared_bytes_compile(arch):
    src = tegula.compile(decode(), out_idx=[-1], target=f"cuda:{arch}").get_kernel_source()
    assert "extern __shared__" in src or "__shared__" in src


@T.prim_func
def two_phases(X: T.Tensor((256,), "float32"), Y: T.Tensor((256,), "float32")):
    with T.Kernel(1, threads=128) as bx:
        a = T.alloc_shared((128,), "float32")
        b = T.alloc_shared((128,), "float32")
        T.copy(X[0:128], a)
        for i in T.Parallel(128):
            Y[i] = a[127 - i]           # threads read what others wrote: a barrier before
        for i in T.Parallel(128):
            b[i] = X[128 + i] * 2.0      # nothing orders this after the reads of a, but sharing
        for i in T.Parallel(128):
            Y[128 + i] = b[127 - i]


@pytest.mark.parametrize("target", ["cpu", "cuda-emu"])
def test_a_barrier_goes_in_where_sharing_needs_one(rng, target):
    off, k = offsets(two_phases)
    assert off["a"][0] == off["b"][0]
    assert sum(map(is_sync, k.body.stmts)) == 3  # after a's copy, before b's writes, before b's reads
    x = rng.standard_normal(256).astype(np.float32)
    y = tegula.compile(two_phases, out_idx=[-1], target=target)(x)
    np.testing.assert_array_equal(y.astype(np.float64),
                                  np.concatenate([x[127::-1], (x[128:].astype(np.float64) * 2)[::-1]]))


def bias_or_not(with_bias, M=128, N=128):
    @T.prim_func
    def f(X: T.Tensor((M, N), "float16"), Bias: T.Tensor((M, N), "float16"), Y: T.Tensor((M, N), "float16")):
        with T.Kernel(1, threads=128):
            X_s = T.alloc_shared((M, N), "float16")
            Bias_s = T.alloc_shared((M, N), "float16")
            acc = T.alloc_fragment((M, N), "float32")
            T.copy(X, X_s)
            T.copy(X_s, acc)
            if with_bias:
                T.copy(Bias, Bias_s)
                for i, j in T.Parallel(M, N):
                    acc[i, j] += Bias_s[i, j]
            T.copy(acc, Y)

    return f


@pytest.mark.parametrize("target", [SM80, SM90])
def test_a_shared_tile_nothing_touches_takes_no_bytes(target):
    off, k = offsets(bias_or_not(False), target)
    assert k.annotations["smem_bytes"] == 128 * 128 * 2 and off["X_s"][0] == 0
    assert offsets(bias_or_not(False), target, NO_REUSE)[1].annotations["smem_bytes"] > 2 * 128 * 128 * 2 - 1


def test_an_untouched_tile_changes_no_result(rng):
    x = rng.standard_normal((128, 128)).astype(np.float16)
    bias = rng.standard_normal((128, 128)).astype(np.float16)
    for with_bias in (False, True):
        k = tegula.compile(bias_or_not(with_bias), out_idx=[2], target="cuda-emu")
        want = x.astype(np.float32) + (bias.astype(np.float32) if with_bias else 0)
        np.testing.assert_allclose(k(x, bias).astype(np.float32), want.astype(np.float16).astype(np.float32),
                                   rtol=1e-3, atol=1e-3)


@T.prim_func
def barrier_then_tile(X: T.Tensor((128,), "float32"), Y: T.Tensor((128,), "float32")):
    with T.Kernel(1, threads=128):
        t = T.get_thread_binding()
        bar = T.alloc_barrier(128)
        s = T.alloc_shared((128,), "float32")
        T.mbarrier_arrive(bar)
        T.mbarrier_wait_parity(bar, 0)
        T.sync_threads()
        s[t] = X[t]
        T.sync_threads()
        Y[t] = s[127 - t]


@pytest.mark.parametrize("target", [SM80, SM90])
def test_mbarriers_never_share_bytes(target, rng):
    off, _ = offsets(barrier_then_tile, target)
    (bar,) = [n for n in off if n != "s"]
    assert not overlaps(off, bar, "s")
    x = rng.standard_normal(128).astype(np.float32)
    k = tegula.compile(barrier_then_tile, out_idx=[1], target=f"cuda-emu:{target.arch}")
    np.testing.assert_array_equal(k(x), x[::-1])


def test_shared_bytes_with_tma_stages_compute_the_same_on_the_hopper_emulator(rng):
    """sm_90a: the K/V stages arrive by TMA on mbarriers; the planner keeps them apart from
    everything live in the loop, and O_s still reuses Q_s after it."""
    prim = decode(stages=2)
    off, _ = offsets(prim, SM90)
    assert overlaps(off, "O_s", "Q_s") and not overlaps(off, "KV_s", "Q_s")
    q = rng.standard_normal((16, 64)).astype(np.float16)
    qp = rng.standard_normal((16, 32)).astype(np.float16)
    kv = rng.standard_normal((256, 64)).astype(np.float16)
    kp = rng.standard_normal((256, 32)).astype(np.float16)
    k = tegula.compile(prim, out_idx=[-1], target="cuda-emu:sm_90a")
    assert "tma" in k.get_kernel_source()
    np.testing.assert_allclose(k(q, qp, kv, kp).astype(np.float64), decode_reference(q, qp, kv, kp),
                               rtol=2e-2, atol=2e-2)
