"""Softmax overlap (TmaPipeline, sm_90a): attention's second gemm of key block j - 1 runs on the
tensor cores beside the softmax of block j. The schedule's IR and CUDA source here (compile-only),
its results on the Hopper emulator (wgmma, TMA, mbarriers, with their hazard checks) against a
float64 reference, and on an H200 in the ``gpu`` tests."""
import sys
from pathlib import Path

import numpy as np
import pytest

import tegula
from tegula import config
from tegula.backends.cuda.compiler import available_backends
from tegula.backends.cuda.pipeline import lower
from tegula.backends.emu import execute
from tegula.errors import RaceError
from tegula.ir import expr as E
from tegula.ir import stmt as S
from tegula.passconfig import PassConfigKey
from tegula.target import Target

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "emu"))
from cuda_gpu_util import sm90a_gpu  # noqa: E402
from test_wgmma import _ex, _gemm  # noqa: E402
from hopper_util import Mutate, sync_statements  # noqa: E402

needs_compiler = pytest.mark.skipif(not available_backends(), reason="no CUDA compiler (NVRTC or nvcc) here")

NO_WS = {PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True}
OFF = {**NO_WS, PassConfigKey.TEGULA_SOFTMAX_OVERLAP: False}
ON = {**NO_WS, PassConfigKey.TEGULA_SOFTMAX_OVERLAP: True}  # the small kernels here fit two blocks per SM
# the warp-specialized form (WarpSpecialize: a producer warpgroup on K and V rings)
WS = {PassConfigKey.TEGULA_WARP_SPECIALIZE: True}
WS_ON = {**WS, PassConfigKey.TEGULA_SOFTMAX_OVERLAP: True}
SM90 = Target("cuda", "sm_90a")


def _fa(*args, **kw):
    return _ex("flash_attention").flash_attention(*args, **kw)


def _in_order(text: str, *needles: str) -> list[int]:
    """Where each of ``needles`` is in ``text``, each found after the one before."""
    out, at = [], 0
    for n in needles:
        at = text.index(n, at)
        out.append(at)
    return out


def _loop_source(src: str) -> str:
    return src[src.index("for (int kb = 1"):]


def test_attention_loop_runs_the_second_gemm_beside_the_next_softmax():
    low = lower(_fa(1, 2, 512, 128, False, 1, 128, 128, 2, 256), SM90, NO_WS).script()
    assert "kb_full_late" in low  # V on a ring of its own
    loop = low[low.index("for kb in T.serial"):]
    # in the loop: G1 committed, the previous block's acc_o *= rescale while G1 computes, V's
    # stage awaited, G2 issued, then wait_group 1 (G1 done) before the softmax, its results stored
    # for ptxas to keep them before wait_group 0 (G2 done), then P written
    i_g1, i_commit, _, _, _, i_w1, _, _, i_w0, _ = _in_order(
        loop, "tl::wgmma_ss(", "tl::wgmma_commit_group", "acc_o[", "kb_full_late", "tl::wgmma_rs(",
        "wgmma_wait_group(template=(1,)", "shfl_xor", "tl::wgmma_order_after(", "wgmma_wait_group(template=(0,)", "P[")
    assert "wgmma_wait_group(template=(0,)" not in loop[i_commit:i_w1]
    assert "acc_o[" not in loop[i_w1:i_w0]
    # after the loop: the last block's acc_o *= rescale, then its G2
    end = loop.index("kb_full_late[1]")
    assert "acc_o[" in loop[loop.rindex("P[", 0, end):end] and "tl::wgmma_rs(" in loop[end:]
    # the loop's gemms skip the proxy fence iteration 0 already did
    body = loop[:end]
    assert body.count("tl::fence_proxy_async") == 0 and body.count("tl::wgmma_fence(") == 2


def test_the_pass_config_turns_it_off():
    f = _fa(1, 2, 512, 128, False, 1, 128, 128, 2, 256)
    low = lower(f, SM90, OFF).script()
    assert "kb_full_late" not in low and "wgmma_wait_group(template=(1,)" not in low
    assert "kb_full_late" in lower(f, SM90, {**NO_WS, PassConfigKey.TEGULA_SOFTMAX_OVERLAP: True}).script()


def test_taken_where_registers_and_shared_memory_allow():
    # d128 with one warpgroup on 128 rows: S, acc_o and P take 224 registers per thread: left alone
    big = _fa(1, 2, 512, 128, False, 1, 128, 64, 2, 128)
    assert "kb_full_late" not in lower(big, SM90, NO_WS).script()
    assert "kb_full_late" in lower(big, SM90, ON).script()
    # d64 128x128 tiles: 80 KB of shared memory, two blocks per SM, which P's registers would cost
    d64 = _fa(1, 2, 512, 64, True, 1, 128, 128, 2, 256)
    assert "kb_full_late" not in lower(d64, SM90, NO_WS).script()
    assert "kb_full_late" in lower(d64, SM90, ON).script()
    # d128 128x128 tiles: 160 KB, one block per SM anyway: taken, causal or not
    for causal in (False, True):
        assert "kb_full_late" in lower(_fa(1, 2, 512, 128, causal, 1, 128, 128, 2, 256), SM90, NO_WS).script()


def test_gemm_loops_and_sm80_are_left_alone():
    g = lower(_gemm(512, 512, 512, 128, 128, 32, 3, 256), SM90, NO_WS).script()
    assert "k_full" in g and "full_late" not in g
    s80 = lower(_fa(1, 2, 512, 128, False, 1, 128, 128, 2, 256), Target("cuda", "sm_80"), {}).script()
    assert "mbarrier" not in s80 and "full_late" not in s80


@needs_compiler
@pytest.mark.parametrize("dim, causal", [(128, False), (128, True), (64, False)])
def test_compiles_for_sm90a_without_spills(dim, causal, tmp_path):
    """No local memory and no wait_group the assembler adds by itself (it does when registers a
    wgmma writes are used before the program waits for them)."""
    with config.override(cache_dir=str(tmp_path)):
        k = tegula.compile(_fa(4, 16, 4096, dim, causal, 1, 128, 128, 2, 256), out_idx=[-1], target="cuda:sm_90a",
                           pass_configs={**ON, PassConfigKey.TL_ENABLE_PTXAS_VERBOSE_OUTPUT: True})
    src = k.get_kernel_source()
    assert "kb_full_late" in src and "tl::wgmma_wait_group<1>()" in _loop_source(src)
    log = k.artifact.metadata["log"]
    if "registers" not in log:
        pytest.skip("the compiler gave no resource report")
    assert "0 bytes spill stores, 0 bytes spill loads" in log and "0 bytes stack frame" in log, log
    assert "C7517" not in log and "wgmma.wait_group is injected" not in log, log


# ------------------------------------------------------------------------------- on the emulator

CASES = [  # batch, heads, seq_len, dim, causal, groups, block_M, block_N, stages, threads
    (1, 1, 192, 64, False, 1, 128, 64, 2, 256),
    (1, 2, 200, 64, True, 1, 128, 64, 2, 256),      # ragged tail, causal: masked diagonal blocks
    (1, 1, 64, 64, False, 1, 128, 64, 2, 256),      # one key block: the loop runs no iteration
    (1, 2, 256, 32, True, 2, 64, 32, 3, 128),       # GQA, 3 stages, 64-row tiles on one warpgroup
]


def _random_qkv(rng, b, h, n, d, groups):
    q = rng.standard_normal((b, h, n, d)).astype(np.float16)
    k = rng.standard_normal((b, h // groups, n, d)).astype(np.float16)
    v = rng.standard_normal((b, h // groups, n, d)).astype(np.float16)
    return q, k, v


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
def test_hopper_emulator_matches_float64(case, rng):
    """The wgmma + TMA lowering run by the Hopper emulator, which reports any mbarrier, TMA or
    wgmma hazard (registers read in flight, stages refilled while read)."""
    _emulated(case, ON, ("full_late", "tl::wgmma_rs"), rng)


def _emulated(case: tuple, configs: dict, marks: tuple, rng) -> None:
    """The kernel of ``case`` lowered with ``configs`` (its script showing ``marks``), run by the
    Hopper emulator against float64."""
    b, h, n, d, causal, groups, bm, bn, st, th = case
    low = lower(_fa(*case), SM90, configs)
    assert all(m in low.script() for m in marks)
    q, k, v = _random_qkv(rng, b, h, n, d, groups)
    o = np.zeros_like(q)
    execute(low, [q, k, v, o])
    ref = _ex("flash_attention").reference(q, k, v, causal)
    assert np.abs(o.astype(np.float64) - ref).max() < 5e-3


@pytest.mark.parametrize("form", ["tma", "ws"])
def test_cuda_emu_target_on_sm90a_matches_float64(form, rng):
    """``cuda-emu:sm_90a`` (the gemms on mma.sync there, TMA and the schedule as on the GPU), in
    TmaPipeline's form and in the warp-specialized one."""
    case = (1, 2, 200, 64, True, 1, 128, 64, 2, 256)
    configs, mark = (ON, "full_late") if form == "tma" else (WS_ON, "empty_late")
    kern = tegula.compile(_fa(*case), out_idx=[-1], target="cuda-emu:sm_90a", pass_configs=configs)
    assert mark in kern.get_kernel_source()
    q, k, v = _random_qkv(rng, 1, 2, 200, 64, 1)
    ref = _ex("flash_attention").reference(q, k, v, True)
    assert np.abs(kern(q, k, v).astype(np.float64) - ref).max() < 5e-3


def _in_loop(low, name: str, nth_in_loop: int = 0) -> int:
    """Index among the sync statements of the ``nth_in_loop``-th ``name`` inside the k-loop."""
    stmts = sync_statements(low)
    first_loop = [i for i, s in enumerate(stmts) if s.value.name == "sync_threads"][1]
    hits = [i for i, s in enumerate(stmts) if i > first_loop and s.value.name == name]
    return hits[nth_in_loop]


@pytest.fixture(scope="module")
def small():
    f = _fa(*CASES[0])
    return f, lower(f, SM90, ON)


def _args(rng):
    q, k, v = _random_qkv(rng, 1, 1, 192, 64, 1)
    return [q, k, v, np.zeros_like(q)]


def test_emulator_reports_p_overwritten_while_its_wgmma_reads_it(small, rng):
    """Without the wait_group 0 before ``P = S``, P's registers are rewritten under G2."""
    f, low = small
    i = _in_loop(low, "tl::wgmma_wait_group", 1)
    mutant = Mutate(drop=i).visit(low)
    with pytest.raises(RaceError) as e:
        execute(mutant, _args(rng))
    msg = str(e.value)
    assert "register 'acc_o'[" in msg or "A operand overwritten before wgmma.wait_group" in msg, msg
    assert "flash_attention.py:" in msg


def test_emulator_reports_p_registers_left_unpinned(small, rng):
    """Without fencing P after the wait, the compiler may hand its registers to the softmax
    while the wgmma still reads them: reported at P's next write."""
    f, low = small
    stmts = sync_statements(low)
    i = next(j for j, s in enumerate(stmts) if s.value.name == "tl::wgmma_fence_operands"
             and "P[" in str(s.value.args[0]))
    with pytest.raises(RaceError) as e:
        execute(Mutate(drop=i).visit(low), _args(rng))
    msg = str(e.value)
    assert "register 'P'[" in msg and "wgmma_fence_operands" in msg and "flash_attention.py:95" in msg, msg


def test_emulator_reports_an_a_operand_written_in_flight(small, rng):
    """A generic write into the A registers of a wgmma_rs before its wait_group: P[0] stored right
    after the loop's G2 is committed."""
    f, low = small
    p = next(b for b in _buffers(low) if b.name == "P" and b.scope == "local")

    def change(node):
        return S.SeqStmt((node, S.BufferStore(p, (E.const(0),), E.cast(p.dtype, 0))))

    mutant = Mutate(drop=_in_loop(low, "tl::wgmma_commit_group", 1), change=change).visit(low)
    with pytest.raises(RaceError, match=r"A operand overwritten before wgmma.wait_group: .* register 'P'\["):
        execute(mutant, _args(rng))


def _buffers(low):
    from tegula.ir.visitor import post_order_visit

    out = []
    post_order_visit(low, lambda n: out.append(n.buffer) if isinstance(n, (E.BufferLoad, S.BufferStore)) else None)
    return out


# ------------------------------------------------------------------------------- on the GPU

@pytest.mark.gpu
@pytest.mark.parametrize("dim, bm, bn, stages, threads", [(128, 128, 128, 2, 256), (64, 128, 128, 2, 256),
                                                         (128, 128, 128, 3, 256), (64, 128, 64, 2, 128)])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("seq", [300, 1024])
def test_softmax_overlap_on_gpu(dim, bm, bn, stages, threads, causal, seq):
    _on_gpu((dim, bm, bn, stages, threads, causal, seq), {PassConfigKey.TEGULA_SOFTMAX_OVERLAP: True}, "full_late")


def _on_gpu(cfg: tuple, configs: dict, mark: str) -> None:
    """GQA attention (2 groups) built with ``configs`` (its source showing ``mark``) on the GPU
    against float64."""
    dim, bm, bn, stages, threads, causal, seq = cfg
    torch = sm90a_gpu()
    B, H = 2, 4
    k = tegula.compile(_fa(B, H, seq, dim, causal, 2, bm, bn, stages, threads), out_idx=[-1], target="cuda",
                       pass_configs=configs)
    assert mark in k.get_kernel_source()
    q = torch.randn(B, H, seq, dim, device="cuda", dtype=torch.float16)
    kk, v = (torch.randn(B, H // 2, seq, dim, device="cuda", dtype=torch.float16) for _ in range(2))
    o = k(q, kk, v).double()
    kr, vr = kk.double().repeat_interleave(2, 1), v.double().repeat_interleave(2, 1)
    s = (q.double() @ kr.transpose(-1, -2)) / dim ** 0.5
    if causal:
        s = s.masked_fill(torch.ones(seq, seq, device="cuda").triu(1).bool(), float("-inf"))
    ref = torch.softmax(s, -1) @ vr
    assert torch.isfinite(o).all()
    assert float((o - ref).norm() / ref.norm()) < 5e-3


# ------------------------------------------------------------------------------- warp-specialized


def _roles(low: str) -> tuple[str, str]:
    """(producer, consumers) of a split kernel's lowered script."""
    p, c = low.index("# warp_specialize: (256, 128, 3)"), low.index("# warp_specialize: (0, 256, 1)")
    return low[p:c], low[c:]


def test_warp_specialized_form_feeds_the_schedule_from_k_and_v_rings():
    """The producer warpgroup loads K and V into rings of their own, each stage awaited free on
    its empty barrier; the consumers run the overlap with no block barrier in the loop, free K's
    stage once G1 has retired (wait_group 1) and the previous V stage once G2 has (wait_group 0)."""
    low = lower(_fa(1, 2, 512, 128, False, 1, 128, 128, 2, 256), SM90, WS).script()
    assert "threads=384" in low
    prod, cons = _roles(low)
    assert prod.index("warpgroup_reg_dealloc(template=(40,)") < prod.index("for kb in T.serial(4)")
    _in_order(prod[prod.index("for kb in"):], "mbarrier_wait(T.address_of(kb_empty[kb % 2]", "tma_load",
              "mbarrier_arrive(T.address_of(kb_full[kb % 2]", "mbarrier_wait(T.address_of(kb_empty_late[kb % 2]",
              "tma_load", "mbarrier_arrive(T.address_of(kb_full_late[kb % 2]")
    assert "wgmma" not in prod
    assert "warpgroup_reg_alloc(template=(232,)" in cons and "tma_load" not in cons
    body = cons[cons.index("for kb in T.serial(1, 4)"):]
    body = body[:body.index("flash_attention.py:92)", body.index("P["))]  # up to the last block's rescale
    # no barrier of the consumers' region (ping-pong's turns are named barriers of their own)
    assert "sync_threads" not in body and "named_barrier_sync(1," not in body
    _in_order(body, "tl::wgmma_ss(", "tl::wgmma_rs(", "wgmma_wait_group(template=(1,)",
              "mbarrier_arrive(T.address_of(kb_empty[kb % 2]", "shfl_xor", "wgmma_wait_group(template=(0,)",
              "mbarrier_arrive(T.address_of(kb_empty_late[(kb + 1) % 2]", "P[")
    # the peeled first block frees its K stage after its (waited) G1
    first = cons[:cons.index("for kb in T.serial(1, 4)")]
    assert first.index("wgmma_wait_group(template=(0,)") < first.index("mbarrier_arrive(T.address_of(kb_empty[0]")


def test_warp_specialized_form_is_taken_where_the_overlap_is():
    """Forced warp specialization takes the overlap's form where the overlap would be taken (d128
    128x128 tiles) or is forced; elsewhere (d64: two blocks per SM without it) the plain split;
    unforced, only loops with the same trip count in every block."""
    d128, d64 = _fa(1, 2, 512, 128, True, 1, 128, 128, 2, 256), _fa(1, 2, 512, 64, False, 1, 128, 128, 2, 256)
    assert "kb_empty_late" in lower(d128, SM90, WS).script()
    plain = lower(d64, SM90, WS).script()
    assert "# warp_specialize" in plain and "empty_late" not in plain and "wgmma_wait_group(template=(1,)" not in plain
    assert "kb_empty_late" in lower(d64, SM90, WS_ON).script()
    # by default the overlap's form where every block runs the same number of key blocks (not
    # causal); causal loops are split plainly (test_causal_attention_is_split_plainly_by_default)
    default = lower(d128, SM90, {}).script()
    assert "# warp_specialize" in default and "empty_late" not in default
    assert "kb_empty_late" in lower(_fa(1, 2, 512, 128, False, 1, 128, 128, 2, 256), SM90, {}).script()
    off = lower(d128, SM90, {**WS, PassConfigKey.TEGULA_SOFTMAX_OVERLAP: False}).script()
    assert "# warp_specialize" in off and "empty_late" not in off


@pytest.mark.parametrize("configs", [WS_ON, {PassConfigKey.TEGULA_WS_TMA_PROLOGUE: False}], ids=["overlap", "plain"])
def test_causal_consumers_meet_at_no_barrier_inside_the_loop(configs):
    """Q's named barrier (the consumers wrote Q_shared before the loop: the producer does not load
    it by TMA here) goes before the loop, not
    into every iteration: the loop starts with an mbarrier wait, and in the overlap's form the
    peeled first block runs under ``if 0 < n_blocks``, after which Q's writes still count as
    pending on the path that skipped it."""
    low = lower(_fa(1, 2, 512, 128, True, 1, 128, 128, 2, 256), SM90, configs).script()
    cons = _roles(low)[1]
    loop = cons[cons.rindex("for kb in T.serial("):]
    loop = loop[:loop.index("flash_attention.py:99)")]  # up to the epilogue's acc_o /= l
    assert "named_barrier" not in loop and "sync_threads" not in loop
    assert "named_barrier_sync(1, 256" in cons[:cons.rindex("for kb in T.serial(")]


def test_causal_attention_is_split_plainly_by_default():
    """A causal loop (its trip count grows with blockIdx.x) whose tiles keep the SM to one block
    is split without the overlap: one ring for K and V, each gemm waited for; tegula.softmax_overlap
    on gives the overlap's form, off leaves the loop to TmaPipeline; d64 (two blocks per SM), one
    consumer warpgroup and full attention keep their forms."""
    causal = _fa(1, 2, 512, 128, True, 1, 128, 128, 2, 256)
    low = lower(causal, SM90, {}).script()
    assert "threads=384" in low and "kb_bars" in low and "empty_late" not in low
    assert "wgmma_wait_group(template=(1,)" not in low and "warpgroup_reg_alloc(template=(232,)" in low
    assert "kb_empty_late" in lower(causal, SM90, {PassConfigKey.TEGULA_SOFTMAX_OVERLAP: True}).script()
    off = lower(causal, SM90, {PassConfigKey.TEGULA_SOFTMAX_OVERLAP: False}).script()
    assert "# warp_specialize" not in off and "kb_full" in off
    assert "# warp_specialize" not in lower(_fa(1, 2, 512, 64, True, 1, 128, 128, 2, 256), SM90, {}).script()
    # one consumer warpgroup (128 threads): TmaPipeline's loop, as before
    assert "# warp_specialize" not in lower(_fa(1, 2, 512, 128, True, 1, 128, 128, 2, 128), SM90, {}).script()
    assert "kb_empty_late" in lower(_fa(1, 2, 512, 128, False, 1, 128, 128, 2, 256), SM90, {}).script()


@pytest.mark.parametrize("case", [(1, 2, 320, 128, True, 1, 128, 128, 2, 256),    # ragged, 3 query blocks
                                  (1, 2, 256, 64, True, 2, 128, 64, 3, 256)],     # d64 GQA, 3 stages
                         ids=lambda c: "-".join(map(str, c)))
def test_causal_plain_split_on_the_hopper_emulator_matches_float64(case, rng):
    """The plain split of causal attention (the default for d128; forced at d64 here) run by the
    Hopper emulator, producer and consumers as tasks, against float64."""
    configs = {} if case[3] == 128 else {PassConfigKey.TEGULA_WARP_SPECIALIZE: True,
                                         PassConfigKey.TEGULA_SOFTMAX_OVERLAP: False}
    _emulated(case, configs, ("kb_bars", "warpgroup_reg_alloc"), rng)


PROLOGUE = {PassConfigKey.TEGULA_WS_TMA_PROLOGUE: True}


@pytest.mark.parametrize("causal", [False, True])
def test_producer_loads_q_by_tma_under_ws_tma_prologue(causal):
    """tegula.ws_tma_prologue: Q (copied before the loop, read only by the first gemm) is loaded
    by the producer through TMA on an mbarrier of its own, which the consumers wait for instead of
    loading Q themselves, meeting at a named barrier and fencing the proxies; off, the consumers
    load it."""
    f = _fa(1, 2, 512, 128, causal, 1, 128, 128, 2, 256)
    prod, cons = _roles(lower(f, SM90, PROLOGUE).script())
    _in_order(prod, "tma_load(T.address_of(Q_shared", "mbarrier_arrive(T.address_of(kb_prologue[0]", "for kb in T.serial(")
    assert "Q_shared[" not in cons.split("mbarrier_wait(T.address_of(kb_prologue[0]")[0]
    head = cons[:cons.index("for kb in T.serial(")]
    # no barrier of the consumers' region (ping-pong's first turn is a named barrier of its own)
    assert "named_barrier_sync(1," not in head and "fence_proxy_async" not in head and "copy_vec" not in head
    off = {PassConfigKey.TEGULA_WS_TMA_PROLOGUE: False}
    assert "copy_vec" in _roles(lower(f, SM90, off).script())[1].split("for kb in T.serial(")[0]


@pytest.mark.parametrize("causal", [False, True])
def test_ws_tma_prologue_by_default_only_in_the_plain_split_of_causal_attention(causal):
    """Unset, the producer loads Q in the plain split (causal d128: measured faster) and the
    consumers load it in the overlap's split (full attention: level, left as it was)."""
    f = _fa(1, 2, 512, 128, causal, 1, 128, 128, 2, 256)
    prod, cons = _roles(lower(f, SM90, {}).script())
    assert ("kb_prologue" in prod) == causal
    assert ("copy_vec" in cons.split("for kb in T.serial(")[0]) != causal


@pytest.mark.parametrize("case, configs", [
    ((1, 2, 320, 128, True, 1, 128, 128, 2, 256), {}),        # causal, ragged: the plain split
    ((1, 1, 192, 64, False, 1, 128, 64, 2, 256), WS_ON),       # the overlap's split, Q's box past the end
    ((1, 2, 256, 32, True, 2, 64, 32, 3, 128), WS_ON),         # GQA, 3 stages, one consumer warpgroup
], ids=["causal-plain", "overlap-ragged", "gqa-128"])
def test_producer_loaded_q_on_the_hopper_emulator_matches_float64(case, configs, rng):
    _emulated(case, {**configs, **PROLOGUE}, ("kb_prologue", "warpgroup_reg_alloc"), rng)


@needs_compiler
@pytest.mark.parametrize("causal", [False, True])
def test_warp_specialized_form_compiles_with_setmaxnreg_and_no_spills(causal, tmp_path):
    with config.override(cache_dir=str(tmp_path)):
        k = tegula.compile(_fa(4, 16, 4096, 128, causal, 1, 128, 128, 2, 256), out_idx=[-1], target="cuda:sm_90a",
                           pass_configs={**WS, PassConfigKey.TL_ENABLE_PTXAS_VERBOSE_OUTPUT: True})
    src = k.get_kernel_source()
    assert "tl::warpgroup_reg_alloc<232>" in src and "tl::wgmma_wait_group<1>()" in src[src.index("for (int kb_1 = 1"):]
    log = k.artifact.metadata["log"]
    if "registers" not in log:
        pytest.skip("the compiler gave no resource report")
    assert "0 bytes spill stores, 0 bytes spill loads" in log and "0 bytes stack frame" in log, log
    for warning in ("C7507", "C7518", "C7517", "wgmma.wait_group is injected"):
        assert warning not in log, log


WS_CASES = CASES + [
    (1, 1, 256, 128, True, 1, 128, 128, 2, 256),    # d128, the bench's tiles
    (1, 1, 320, 64, False, 1, 128, 64, 4, 256),     # 4 stages, ragged
]


@pytest.mark.parametrize("case", WS_CASES, ids=lambda c: "-".join(map(str, c)))
def test_warp_specialized_form_on_the_hopper_emulator_matches_float64(case, rng):
    """The producer and the consumer warpgroups run as tasks meeting at the rings' waits; the
    emulator reports any stage refilled before both consumer warpgroups freed it, any wgmma
    register read in flight and any barrier that never completes."""
    _emulated(case, WS_ON, ("empty_late", "warpgroup_reg_alloc"), rng)


@pytest.mark.gpu
@pytest.mark.parametrize("dim, bm, bn, stages", [(128, 128, 128, 2), (128, 128, 128, 3), (64, 128, 64, 2)])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("seq", [300, 1024])
def test_warp_specialized_form_on_gpu(dim, bm, bn, stages, causal, seq):
    _on_gpu((dim, bm, bn, stages, 256, causal, seq), WS_ON, "empty_late")


@pytest.mark.gpu
@pytest.mark.parametrize("stages", [2, 3])
@pytest.mark.parametrize("seq", [300, 1024])
def test_causal_plain_split_on_gpu(stages, seq):
    _on_gpu((128, 128, 128, stages, 256, True, seq), {}, "warpgroup_reg_alloc<232>")


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("seq", [300, 1024])
def test_producer_loaded_q_on_gpu(causal, seq):
    _on_gpu((128, 128, 128, 2, 256, causal, seq), PROLOGUE, "kb_prologue")
