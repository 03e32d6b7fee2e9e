"""The Hopper expert API: ``T.ws`` regions, ``T.tma_copy`` on user barriers, ``T.set_max_nreg``,
``T.fence_proxy_async``, ``T.wait_wgmma``, ``T.copy(disable_tma=)``.

On the interpreter these kernels run with their plain meaning (copies, no register budgets); for
sm_90a they compile to TMA, mbarriers and wgmma (compile-only here); for sm_80 a Hopper-only call
is an error at its line; the ``gpu`` tests run them on an sm_90a GPU.
"""
import sys
from pathlib import Path

import numpy as np
import pytest

import tegula
import tegula.language as T
from tegula.backends.cuda.compiler import available_backends
from tegula.backends.cuda.pipeline import lower
from tegula.errors import KernelTypeError, ScopeError, UnsupportedError
from tegula.passconfig import PassConfigKey
from tegula.target import Target
from tegula_files import names_a_tegula_file

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cuda_gpu_util import sm90a_gpu  # noqa: E402

needs_compiler = pytest.mark.skipif(not available_backends(), reason="no CUDA compiler (NVRTC or nvcc) here")


def _ws_gemm(M, N, K, bm, bn, bk, stages=2, dtype="float16", nreg=False, fence=False):
    """A producer warpgroup (1) loads A and B tiles by TMA into a ring of ``stages`` buffers; the
    consumer warpgroup (0) waits for each, multiplies, and frees it (full/empty barriers)."""

    @T.prim_func
    def ws_gemm(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=256) as (bx, by):
            A_s = T.alloc_shared((stages, bm, bk), dtype)
            B_s = T.alloc_shared((stages, bk, bn), dtype)
            C_l = T.alloc_fragment((bm, bn), "float32")
            bars = T.alloc_barrier([128] * (2 * stages))  # full[0..S), empty[S..2S)
            with T.ws(0):
                T.clear(C_l)
            for ko in range(T.ceildiv(K, bk)):
                with T.ws(1):
                    if nreg:
                        T.set_max_nreg(40, 0)
                    T.mbarrier_wait_parity(bars[ko % stages + stages], ((ko // stages) % 2) ^ 1)
                    T.tma_copy(A[by * bm:(by + 1) * bm, ko * bk:(ko + 1) * bk], A_s[ko % stages, :, :],
                               barrier=bars[ko % stages])
                    T.tma_copy(B[ko * bk, bx * bn], B_s[ko % stages, :, :], barrier=bars[ko % stages])
                    T.mbarrier_arrive(bars[ko % stages])
                with T.ws(0):
                    if nreg:
                        T.set_max_nreg(232, 1)
                    T.mbarrier_wait_parity(bars[ko % stages], (ko // stages) % 2)
                    if fence:
                        T.fence_proxy_async()
                    T.gemm(A_s[ko % stages, :, :], B_s[ko % stages, :, :], C_l)
                    T.mbarrier_arrive(bars[ko % stages + stages])
            with T.ws(0):
                T.copy(C_l, C[by * bm, bx * bn])

    return ws_gemm


def _handoff_gemm(M, N, K, bm, bn, bk, producer=1, dtype="float16"):
    """One shared tile each, handed back and forth on two barriers (data ready / compute done)."""
    consumer = 1 - producer

    @T.prim_func
    def handoff(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=256) as (bx, by):
            A_s = T.alloc_shared((bm, bk), dtype)
            B_s = T.alloc_shared((bk, bn), dtype)
            C_l = T.alloc_fragment((bm, bn), "float32")
            ready = T.alloc_barrier(arrive_count=128)
            done = T.alloc_barrier(arrive_count=128)
            with T.ws(consumer):
                T.clear(C_l)
            for ko in T.Pipelined(T.ceildiv(K, bk), num_stages=2):
                with T.ws(producer):
                    T.barrier_wait(done, (ko + 1) % 2)
                    T.tma_copy(A[by * bm, ko * bk], A_s, barrier=ready)
                    T.tma_copy(B[ko * bk, bx * bn], B_s, barrier=ready)
                    T.barrier_arrive(ready)
                with T.ws(consumer):
                    T.barrier_wait(ready, ko % 2)
                    T.gemm(A_s, B_s, C_l)
                    T.barrier_arrive(done)
            with T.ws(consumer):
                T.copy(C_l, C[by * bm, bx * bn])

    return handoff


def _inputs(rng, M, N, K, dtype=np.float16):
    return rng.standard_normal((M, K)).astype(dtype), rng.standard_normal((K, N)).astype(dtype)


def _check(c, a, b, tol=2e-3):
    ref = a.astype(np.float64) @ b.astype(np.float64)
    out = np.asarray(c, dtype=np.float64)
    assert np.isfinite(out).all()
    assert np.linalg.norm(out - ref) / np.linalg.norm(ref) < tol


# ------------------------------------------------------------------------- the interpreter

@pytest.mark.parametrize("make", [lambda: _ws_gemm(128, 192, 96, 64, 64, 32, 2, nreg=True, fence=True),
                                  lambda: _ws_gemm(64, 64, 128, 64, 64, 32, 3),
                                  lambda: _handoff_gemm(128, 64, 96, 64, 64, 32, producer=0),
                                  lambda: _handoff_gemm(128, 64, 96, 64, 64, 32, producer=1)],
                         ids=["ring2-nreg", "ring3", "handoff-p0", "handoff-p1"])
def test_warp_specialized_gemm_on_the_interpreter(make, rng):
    _run_on(make(), "cpu", rng)


def _run_on(f, target, rng):
    M, K = (int(d) for d in f.params[0].shape)
    N = int(f.params[1].shape[1])
    a, b = _inputs(rng, M, N, K)
    c = np.zeros((M, N), np.float16)
    k = tegula.compile(f, target=target)
    k(a, b, c)
    _check(c, a, b)
    return k


@pytest.mark.parametrize("make", [lambda: _ws_gemm(128, 128, 128, 64, 64, 32, 2, nreg=True, fence=True),
                                  lambda: _handoff_gemm(64, 128, 96, 64, 64, 32, producer=1)],
                         ids=["ring2-nreg", "handoff-p1"])
def test_warp_specialized_gemm_on_the_hopper_emulator(make, rng):
    """The sm_90a lowering itself (TMA, mbarriers, wgmma, setmaxnreg), with the emulator's checks."""
    k = _run_on(make(), "cuda-emu:sm_90a", rng)
    assert "tl::tma_load" in k.artifact.source and "tl::wgmma_ss" in k.artifact.source


# ----------------------------------------------------------------------- sm_90a, compile-only

def _lowered(f, arch="sm_90a", pass_configs=None):
    return lower(f, Target("cuda", arch), pass_configs or {}).script()


def test_regions_lower_to_warpgroup_branches_with_tma_and_no_block_barrier_in_the_loop():
    s = _lowered(_ws_gemm(256, 256, 256, 128, 128, 64, 2))
    loop = s[s.index("for ko in"):]
    assert "if tx >= 128:" in loop and "if tx < 128:" in loop
    assert loop.count("tl::tma_load") == 3  # A: one 128B-swizzle block; B: two of 64 columns
    assert "tl::mbarrier_expect_tx" in loop and "tl::wgmma_ss" in loop
    body = loop[:loop.index("warp_specialize: (0, 128, 1)", loop.index("wgmma_ss"))]
    assert "sync_threads" not in body  # the regions hand tiles over on the user's mbarriers only


def test_tile_ops_in_a_region_are_laid_out_for_its_threads():
    s = _lowered(_ws_gemm(256, 256, 256, 128, 128, 64, 2))
    assert "'C_l': 'WgmmaLayout(128, 128, 1)'" in s  # one warpgroup holds the whole accumulator


def test_set_max_nreg_and_fence_lower_to_their_primitives():
    s = _lowered(_ws_gemm(256, 256, 256, 128, 128, 64, 2, nreg=True, fence=True),
                 pass_configs={"tegula.tma_store": False})
    assert "tl::warpgroup_reg_dealloc(template=(40,)" in s and "tl::warpgroup_reg_alloc(template=(232,)" in s
    # the user's fence; the gemm needs none of its own: only TMA writes its tiles (the epilogue
    # stores from registers here, with no fence of its own before a TMA store)
    assert s.count("tl::fence_proxy_async") == 1


@needs_compiler
@pytest.mark.parametrize("make", [lambda: _ws_gemm(512, 512, 512, 128, 128, 64, 2, nreg=True),
                                  lambda: _handoff_gemm(512, 512, 512, 128, 128, 64)], ids=["ring", "handoff"])
def test_warp_specialized_gemm_compiles_for_sm90a(make, tmp_path):
    from tegula import config

    with config.override(cache_dir=str(tmp_path)):
        k = tegula.compile(make(), target="cuda:sm_90a")
    src = k.get_kernel_source()
    assert "__grid_constant__ tl::TensorMap" in src and "tl::tma_load(" in src and "tl::wgmma_ss<" in src
    assert k.artifact.cubin


def test_disable_tma_keeps_a_pipelined_copy_on_cp_async():
    M = N = K = 512

    @T.prim_func
    def g(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(4, 4, threads=128) as (bx, by):
            A_s = T.alloc_shared((128, 32), "float16")
            B_s = T.alloc_shared((32, 128), "float16")
            C_l = T.alloc_fragment((128, 128), "float32")
            T.clear(C_l)
            for k in T.Pipelined(K // 32, num_stages=3):
                T.copy(A[by * 128, k * 32], A_s, disable_tma=True)
                T.copy(B[k * 32, bx * 128], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * 128, bx * 128])

    s = _lowered(g)
    assert "tl::tma_load" not in s and "tl::cp_async" in s
    plain = _lowered(g.with_attr("x", 1) if hasattr(g, "with_attr") else g, pass_configs={})
    assert "tl::cp_async" in plain


# ------------------------------------------------------------------- errors, older GPUs

def _raises_at(exc, fn, line_text):
    with pytest.raises(exc) as ei:
        fn()
    text = str(ei.value)
    assert line_text in text, text
    assert not names_a_tegula_file(text.split("hint")[0])
    return text


@pytest.mark.parametrize("target", ["cuda:sm_80", "cuda-emu"])
def test_tma_copy_is_an_error_for_sm80(target):
    f = _ws_gemm(128, 128, 128, 64, 64, 32, 2)
    if target == "cuda-emu":
        run = lambda: tegula.compile(f, target="cuda-emu")  # noqa: E731
    else:
        run = lambda: lower(f, Target("cuda", "sm_80"), {})  # noqa: E731
    text = _raises_at(UnsupportedError, run, "T.tma_copy(A[by * bm")
    assert "needs sm_90" in text and "sm_80" in text


def test_set_max_nreg_is_an_error_for_sm80():
    f = _ws_gemm(128, 128, 128, 64, 64, 32, 2, nreg=True)
    text = _raises_at(UnsupportedError, lambda: lower(f, Target("cuda", "sm_80"), {}), "T.set_max_nreg(40, 0)")
    assert "T.set_max_nreg needs sm_90" in text


def _parse(fn):
    return lambda: T.prim_func(fn)


def test_region_errors_name_the_line():
    def nested(A: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=256):
            with T.ws(0):
                with T.ws(0):
                    T.fence_proxy_async()

    _raises_at(ScopeError, _parse(nested), "with T.ws(0):")

    def beyond(A: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=256):
            with T.ws(2):
                T.fence_proxy_async()

    text = _raises_at(KernelTypeError, _parse(beyond), "with T.ws(2):")
    assert "256..383" in text


def test_fragment_outside_the_regions_is_an_error():
    @T.prim_func
    def outside(A: T.Tensor((64, 64), "float16"), C: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=256):
            A_s = T.alloc_shared((64, 64), "float16")
            F = T.alloc_fragment((64, 64), "float32")
            with T.ws(0):
                T.copy(A, A_s)
            T.copy(A_s, F)
            T.copy(F, C)

    _raises_at(UnsupportedError, lambda: lower(outside, Target("cuda", "sm_90a"), {}), "T.copy(A_s, F)")


def test_tma_copy_argument_errors():
    def no_barrier(A: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((64, 64), "float16")
            T.tma_copy(A, A_s)

    _raises_at(KernelTypeError, _parse(no_barrier), "T.tma_copy(A, A_s)")

    def from_shared(A: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128):
            bar = T.alloc_barrier(1)
            A_s = T.alloc_shared((64, 64), "float16")
            B_s = T.alloc_shared((64, 64), "float16")
            T.tma_copy(A_s, B_s, barrier=bar)

    text = _raises_at(KernelTypeError, _parse(from_shared), "T.tma_copy(A_s, B_s, barrier=bar)")
    assert "global memory into shared memory" in text

    def bad_nreg(A: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128):
            T.set_max_nreg(30, 1)

    _raises_at(KernelTypeError, _parse(bad_nreg), "T.set_max_nreg(30, 1)")


# --------------------------------------------------------------------------------- the GPU

@pytest.mark.gpu
@pytest.mark.parametrize("make", [lambda: _ws_gemm(1024, 768, 512, 128, 128, 64, 2),
                                  lambda: _ws_gemm(1000, 640, 520, 128, 128, 64, 3, nreg=True, fence=True),
                                  lambda: _ws_gemm(512, 512, 512, 128, 256, 64, 2, dtype="bfloat16"),
                                  lambda: _handoff_gemm(1024, 512, 512, 128, 128, 64, producer=0),
                                  lambda: _handoff_gemm(512, 1024, 512, 128, 128, 64, producer=1)],
                         ids=["ring2", "ring3-nreg-ragged", "ring2-bf16", "handoff-p0", "handoff-p1"])
def test_warp_specialized_gemm_on_gpu(make, rng):
    torch = sm90a_gpu()
    f = make()
    M, K = (int(d) for d in f.params[0].shape)
    N = int(f.params[1].shape[1])
    dtype = f.params[0].dtype.name
    tdt = getattr(torch, dtype)
    a = torch.tensor(rng.standard_normal((M, K)), dtype=tdt, device="cuda")
    b = torch.tensor(rng.standard_normal((K, N)), dtype=tdt, device="cuda")
    c = torch.full((M, N), float("nan"), dtype=tdt, device="cuda")
    tegula.compile(f, target="cuda")(a, b, c)
    torch.cuda.synchronize()
    _check(c.double().cpu().numpy(), a.double().cpu().numpy(), b.double().cpu().numpy(),
           tol=1e-2 if dtype == "bfloat16" else 2e-3)


# ------------------------------------------------------------- the WarpSpecialize pass

NO_WS = {PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True}


def _example(name):
    import importlib
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "examples"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.pop(0)


def test_pass_splits_the_example_gemm_into_producer_and_consumers():
    f = _example("gemm").matmul.get_tir(1024, 1024, 1024, 128, 256, 64, 3, 256, dtype="float16")
    s = _lowered(f, pass_configs={PassConfigKey.TEGULA_WGMMA_OVERLAP: False,  # the plain split: not by default
                                  PassConfigKey.TEGULA_WARP_SPECIALIZE: True})
    P, C = "# warp_specialize: (256, 128, 3)", "# warp_specialize: (0, 256, 1)"
    assert "threads=384" in s
    # one if / else, each role with its own copy of the loop
    prod, cons = s[s.index(P):s.index(C)], s[s.index(C):]
    assert prod.index("warpgroup_reg_dealloc(template=(40,)") < prod.index("for k in")
    assert cons.index("warpgroup_reg_alloc(template=(232,)") < cons.index("for k in")
    assert "tl::tma_load" in prod and "wgmma" not in prod and "mbarrier_wait" in prod
    assert "tl::tma_load" not in cons and "wgmma_ss" in cons and "mbarrier_arrive" in cons
    assert "wgmma_wait_group(template=(1,)" not in cons
    for loop in (prod[prod.index("for k in"):], cons[cons.index("for k in"):cons.index("T.tl::copy_vec")]):
        assert "sync_threads" not in loop and "named_barrier" not in loop  # the rings hand the stages over
    assert "WgmmaLayout(128, 256, 2)" in s  # the consumers keep the block's layouts


@needs_compiler
def test_split_gemm_keeps_setmaxnreg_and_wgmma_in_flight_through_ptxas():
    """With each role's loop in its own branch of one if / else, ptxas applies setmaxnreg and
    keeps the consumers' wgmma asynchronous (it ignores or serializes them otherwise, C7507 /
    C7518)."""
    from tegula.backends.cuda.compiler import compile_cuda

    for cfg in ((128, 256, 64, 4, 256), (64, 128, 64, 4, 128)):  # with the overlap, without
        f = _example("gemm").matmul.get_tir(1024, 1024, 1024, *cfg, dtype="float16")
        src = tegula.compile(f, out_idx=[-1], target="cuda:sm_90a").get_kernel_source()
        assert "tl::warpgroup_reg_alloc<232>" in src
        log = compile_cuda(src, "sm_90a", options=["--ptxas-options=-v"]).log
        assert "Used " in log and "C7507" not in log and "C7518" not in log, log
        assert " 0 bytes spill stores" in log, log


def test_pass_takes_by_default_only_the_loops_it_measured_faster_on():
    """Loops of gemms over tiles up to 64x128 (no overlap) or of at least 128x256 (one k-tile of
    wgmma in flight in the consumers), non-causal attention the softmax overlap suits and causal
    attention whose tiles keep the SM to one block (split plainly): taken; the corpus's 128x128
    GEMM and other attention: left, unless forced."""
    g, fa = _example("gemm"), _example("flash_attention")
    skinny = g.matmul.get_tir(64, 1024, 1024, 64, 128, 64, 4, 128)
    big4 = g.matmul.get_tir(1024, 1024, 1024, 128, 256, 64, 4, 256)
    big3 = g.matmul.get_tir(1024, 1024, 1024, 128, 256, 64, 3, 256)
    attn = fa.flash_attention(1, 2, 512, 128, False, 1, 128, 128, 2, 256)
    assert "# warp_specialize" in _lowered(skinny) and "wgmma_wait_group(template=(1,)" not in _lowered(skinny)
    for big in (big4, big3):
        s = _lowered(big)
        assert "# warp_specialize" in s and "wgmma_wait_group(template=(1,)" in s
    # attention the softmax overlap suits, with the same number of key blocks in every block:
    # the consumers run that schedule; causal (trip counts growing with blockIdx.x): the plain split
    assert "kb_empty_late" in _lowered(attn)
    causal = _lowered(fa.flash_attention(1, 2, 512, 128, True, 1, 128, 128, 2, 256))
    assert "# warp_specialize" in causal and "empty_late" not in causal
    assert "# warp_specialize" not in _lowered(fa.flash_attention(1, 2, 512, 64, False, 1, 128, 128, 2, 256))
    corpus = g.matmul.get_tir(1024, 1024, 1024, 128, 128, 32, 3, 128)  # 1.46x slower split (H200)
    assert "# warp_specialize" not in _lowered(corpus)
    on = {PassConfigKey.TEGULA_WARP_SPECIALIZE: True}
    assert "# warp_specialize" in _lowered(attn, pass_configs=on)
    # forced on attention that the softmax overlap suits: the consumers run that schedule
    assert "kb_empty_late" in _lowered(attn, pass_configs=on)
    plain = _lowered(attn, pass_configs={**on, PassConfigKey.TEGULA_SOFTMAX_OVERLAP: False})
    assert "# warp_specialize" in plain and "wgmma_wait_group(template=(1,)" not in plain  # the softmax reads C
    assert "# warp_specialize" not in _lowered(skinny, pass_configs={PassConfigKey.TEGULA_WARP_SPECIALIZE: False})
    # a 128x256 tile without the overlap: TmaPipeline's (overlapped at 4 stages) measured as fast
    assert "# warp_specialize" not in _lowered(big4, pass_configs={PassConfigKey.TEGULA_WGMMA_OVERLAP: False})
    s = _lowered(big4, pass_configs={PassConfigKey.TEGULA_WARP_SPECIALIZE: False})
    assert "# warp_specialize" not in s and "wgmma_wait_group(template=(1,)" in s  # TmaPipeline's overlap


def test_consumers_keep_one_k_tile_of_wgmma_in_flight_and_free_the_previous_stage():
    """wgmma of k-tile k is committed, then wait_group 1 retires k-tile k - 1, whose stage the
    consumers free; after the loop the last group is drained before the epilogue reads C."""
    f = _example("gemm").matmul.get_tir(1024, 1024, 1024, 128, 256, 64, 4, 256)
    s = _lowered(f)
    cons = s[s.index("# warp_specialize: (0, 256, 1)"):]
    loop, epi = cons[cons.index("for k in"):cons.index("T.tl::copy_vec")], cons[cons.index("T.tl::copy_vec") - 400:]
    assert loop.index("wgmma_wait_group(template=(1,)") < loop.index("if k > 0:") < loop.index("mbarrier_arrive")
    assert "k_bars[(k + 3) % 4 + 4]" in loop.replace("T.address_of(", "")  # the previous stage's empty barrier
    # the last k-tile after the loop, waiting for every group (ptxas keeps the epilogue's reads
    # behind that wait; behind a drain after the loop it moved some ahead of it)
    assert "for k in T.serial(15):" in loop
    last = loop[loop.rindex("mbarrier_wait"):]
    assert last.index("wgmma_wait_group(template=(0,)") > last.index("wgmma_ss") and "mbarrier_arrive" not in last
    assert "fence_proxy_async" not in loop  # TMA-only tiles: no fence


@pytest.mark.parametrize("cfg, M, N, K", [((128, 256, 64, 3, 256), 256, 512, 448),
                                          ((128, 256, 64, 2, 256), 128, 256, 200),   # ragged K, 2 stages
                                          ((64, 128, 64, 4, 128), 64, 256, 320),     # forced on a small tile
                                          ((128, 256, 64, 3, 256), 128, 256, 64)],   # one k-tile: no loop left
                         ids=["128x256-s3", "ragged-s2", "64x128-s4", "one-k-tile"])
def test_overlapped_consumers_run_on_the_hopper_emulator(cfg, M, N, K, rng):
    pc = {PassConfigKey.TEGULA_WARP_SPECIALIZE: True, PassConfigKey.TEGULA_WGMMA_OVERLAP: True}
    k = tegula.compile(_example("gemm").matmul.get_tir(M, N, K, *cfg), out_idx=[-1], target="cuda-emu:sm_90a",
                       pass_configs=pc)
    assert "wgmma_wait_group(template=(1,)" in k.artifact.source and "warpgroup_reg_alloc" in k.artifact.source
    a, b = _inputs(rng, M, N, K)
    _check(k(a, b), a, b)


def test_pass_is_off_with_its_pass_config_with_tma_off_and_on_sm80():
    f = _example("gemm").matmul.get_tir(1024, 1024, 1024, 128, 256, 64, 3, 256, dtype="float16")
    assert "warp_specialize" not in _lowered(f, pass_configs=NO_WS)
    assert "warp_specialize" not in _lowered(f, pass_configs={PassConfigKey.TL_DISABLE_TMA_LOWER: True})
    assert "warp_specialize" not in _lowered(
        _example("gemm").matmul.get_tir(1024, 1024, 1024, 128, 256, 32, 3, 256), arch="sm_80")
    from tegula.transform import pipeline_for

    names = pipeline_for("cuda:sm_90a").names()
    assert names.index("WarpSpecialize") < names.index("TmaPipeline")
    assert "WarpSpecialize" not in pipeline_for("cuda:sm_90a", NO_WS).names()


def test_pass_leaves_kernels_asked_for_two_blocks_per_sm():
    """Its register budgets (setmaxnreg 40 / 232) fit one block per SM only."""
    f = _example("gemm").matmul.get_tir(1024, 1024, 1024, 128, 256, 64, 4, 256)
    assert "# warp_specialize" in _lowered(f)
    assert "# warp_specialize" not in _lowered(f, pass_configs={PassConfigKey.TEGULA_MIN_BLOCKS_PER_SM: 2})
    assert "# warp_specialize" in _lowered(f, pass_configs={PassConfigKey.TEGULA_MIN_BLOCKS_PER_SM: 1})

    @T.prim_func
    def two(A: T.Tensor((1024, 1024), "float16"), B: T.Tensor((1024, 1024), "float16"),
            C: T.Tensor((1024, 1024), "float16")):
        with T.Kernel(4, 8, threads=256) as (bx, by):
            T.annotate_min_blocks_per_sm(2)
            A_s = T.alloc_shared((128, 64), "float16")
            B_s = T.alloc_shared((64, 256), "float16")
            C_l = T.alloc_fragment((128, 256), "float32")
            T.clear(C_l)
            for k in T.Pipelined(16, num_stages=3):
                T.copy(A[by * 128, k * 64], A_s)
                T.copy(B[k * 64, bx * 256], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * 128, bx * 256])

    assert "# warp_specialize" not in _lowered(two)


def test_pass_forced_takes_attention_with_its_prologue_in_the_consumers():
    f = _example("flash_attention").flash_attention(1, 2, 512, 128, True, 1, 128, 128, 2, 256)
    s = _lowered(f, pass_configs={PassConfigKey.TEGULA_WARP_SPECIALIZE: True})
    assert "threads=384" in s
    cons = s[s.index("# warp_specialize: (0, 256, 1)"):]
    assert "tl::wgmma_rs" in cons and cons.count("tl::tma_load") == 0
    assert "T.tl::copy_vec" in cons[:cons.index("for kb in")]  # the Q tile, loaded by the consumers first


def test_pass_leaves_kernels_it_cannot_take():
    """K = 70 halves: rows of 140 bytes, which TMA cannot load; 512 threads: no room for a producer."""
    g = _example("gemm")
    assert "warp_specialize" not in _lowered(g.matmul.get_tir(256, 256, 70, 128, 128, 32, 3, 128))
    assert "warp_specialize" not in _lowered(g.matmul.get_tir(256, 256, 256, 128, 128, 32, 3, 512))


def test_pass_output_runs_on_the_hopper_emulator(rng):
    """A loop the pass takes by default (64-row tiles), run as lowered, against float64."""
    M, N, K = 64, 256, 192
    f = _example("gemm").matmul.get_tir(M, N, K, 64, 128, 64, 3, 128)
    k = tegula.compile(f, out_idx=[-1], target="cuda-emu:sm_90a")
    assert "warpgroup_reg_alloc" in k.artifact.source
    a, b = _inputs(rng, M, N, K)
    _check(k(a, b), a, b)


def _smem_epilogue_gemm(M, N, K, bm, bn, bk, S, threads):
    """The example GEMM with its epilogue through a shared tile (fragment -> shared -> global)."""

    @T.prim_func
    def g(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm), threads=threads) as (bx, by):
            A_s = T.alloc_shared((bm, bk), "float16")
            B_s = T.alloc_shared((bk, bn), "float16")
            C_s = T.alloc_shared((bm, bn), "float16")
            C_l = T.alloc_fragment((bm, bn), "float32")
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, bk), num_stages=S):
                T.copy(A[by * bm, k * bk], A_s)
                T.copy(B[k * bk, bx * bn], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C_s)
            T.copy(C_s, C[by * bm, bx * bn])

    return g


def test_split_kernels_keep_the_barriers_inside_each_role(rng):
    """Inside one role the threads still hand shared tiles to each other (the consumers' epilogue
    through shared memory, attention's Q tile loaded before the loop): a named barrier orders
    them, and the emulator finds no race."""
    M, N, K = 128, 256, 192
    f = _smem_epilogue_gemm(M, N, K, 128, 256, 64, 3, 256)
    s = _lowered(f)
    assert "# warp_specialize" in s and "tl::named_barrier_sync(1, 256" in s
    k = tegula.compile(f, target="cuda-emu:sm_90a")
    a, b = _inputs(rng, M, N, K)
    c = np.full((M, N), np.nan, np.float16)
    k(a, b, c)
    _check(c, a, b)
    fa = _example("flash_attention")
    q, kk, v = (rng.standard_normal((1, 1, 256, 64)).astype(np.float16) for _ in range(3))
    for causal in (False, True):
        k = tegula.compile(fa.flash_attention(1, 1, 256, 64, causal, 1, 128, 128, 2, 256), out_idx=[-1],
                           target="cuda-emu:sm_90a", pass_configs={PassConfigKey.TEGULA_WARP_SPECIALIZE: True})
        assert "warpgroup_reg_alloc" in k.artifact.source
        np.testing.assert_allclose(k(q, kk, v).astype(np.float64), fa.reference(q, kk, v, causal), atol=2e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("ws", [True, False])
@pytest.mark.parametrize("case", ["gemm-fp16", "gemm-bf16-skinny", "attn-d128-causal", "attn-d64"])
def test_pass_results_on_gpu(case, ws, rng):
    torch = sm90a_gpu()
    pc = {PassConfigKey.TEGULA_WARP_SPECIALIZE: ws}
    if case.startswith("gemm"):
        dtype = "bfloat16" if "bf16" in case else "float16"
        M, N, K, cfg = (64, 512, 384, (64, 128, 64, 4, 128)) if "skinny" in case else (1000, 768, 520, (128, 256, 64, 4, 256))
        k = tegula.compile(_example("gemm").matmul.get_tir(M, N, K, *cfg, dtype=dtype), out_idx=[-1],
                           target="cuda", pass_configs=pc)
        assert ("tl::warpgroup_reg_alloc" in k.get_kernel_source()) == ws
        tdt = getattr(torch, dtype)
        a = torch.tensor(rng.standard_normal((M, K)), dtype=tdt, device="cuda")
        b = torch.tensor(rng.standard_normal((K, N)), dtype=tdt, device="cuda")
        _check(k(a, b).double().cpu().numpy(), a.double().cpu().numpy(), b.double().cpu().numpy(),
               tol=1e-2 if dtype == "bfloat16" else 2e-3)
        return
    fa = _example("flash_attention")
    dim, causal = (128, True) if "d128" in case else (64, False)
    B, H, S = 1, 2, 300
    k = tegula.compile(fa.flash_attention(B, H, S, dim, causal, 1, 128, 128, 2, 256), out_idx=[-1],
                       target="cuda", pass_configs=pc)
    q, kk, v = (rng.standard_normal((B, H, S, dim)) for _ in range(3))
    o = k(*(torch.tensor(x, dtype=torch.float16, device="cuda") for x in (q, kk, v)))
    ref = fa.reference(q.astype(np.float16), kk.astype(np.float16), v.astype(np.float16), causal)
    out = o.double().cpu().numpy()
    assert np.isfinite(out).all() and np.abs(out - ref).max() < 2e-2
