"""Ping-pong of the consumer warpgroups (WarpSpecialize's rule, ``tegula.ws_pingpong``, sm_90a): in
the softmax overlap's split the warpgroups issue their gemms in turn on named barriers of their
own. Its IR and CUDA (compile-only here), its results on the Hopper emulator (per-warpgroup
tasks, bar.sync / bar.arrive) against float64, and on an H200 in the ``gpu`` tests."""
import sys
from pathlib import Path

import pytest

import tegula
from tegula import config
from tegula.backends.cuda.compiler import available_backends
from tegula.backends.cuda.passes import ws_pingpong
from tegula.ir import expr as E
from tegula.backends.cuda.pipeline import lower
from tegula.passconfig import PassConfigKey
from tegula.tools import trace

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "emu"))
from test_softmax_overlap import SM90, WS_ON, _emulated, _fa, _on_gpu, _roles  # noqa: E402

needs_compiler = pytest.mark.skipif(not available_backends(), reason="no CUDA compiler (NVRTC or nvcc) here")

PP = {PassConfigKey.TEGULA_WS_PINGPONG: True}
NO_PP = {PassConfigKey.TEGULA_WS_PINGPONG: False}
TAKE = "tl::named_barrier_sync(T.thread_idx() // 128 + 9, 256"
GIVE = "tl::named_barrier_arrive((T.thread_idx() // 128 + 1) % 2 + 9, 256"


def _loop(cons: str) -> str:
    return cons[cons.index("for kb in T.serial(1"):]


def test_turns_frame_the_gemms_each_warpgroup_issues_in_the_loop():
    """In the loop: wait K, take the turn, G1 and G2 issued, hand the turn on, then wait_group 1
    and the softmax; before the loop the last warpgroup gives warpgroup 0 the first turn, after
    the epilogue warpgroup 0 takes the last one."""
    _, cons = _roles(lower(_fa(1, 2, 512, 128, False, 1, 128, 128, 2, 256), SM90, PP).script())
    loop = _loop(cons)
    i_take, i_g1, i_g2, i_give, i_w1 = (loop.index(x) for x in (TAKE, "tl::wgmma_ss(", "tl::wgmma_rs(", GIVE,
                                                                "wgmma_wait_group(template=(1,)"))
    assert loop.index("kb_full[kb % 2]") < i_take < i_g1 < i_g2 < i_give < i_w1
    assert loop.count(TAKE) == 1 and loop.count(GIVE) == 1
    head = cons[:cons.index("for kb in T.serial(1")]
    assert "T.thread_idx() // 128 == 1:" in head and "tl::named_barrier_arrive(9, 256" in head
    assert TAKE not in head  # the peeled first block runs outside the turns
    tail = cons[cons.rindex("O["):]
    assert "T.thread_idx() // 128 == 0:" in tail and "tl::named_barrier_sync(9, 256" in tail


def test_the_rule_needs_two_consumer_warpgroups_and_the_overlaps_split():
    n = E.Var("n")
    assert ws_pingpong.turns_for(256, n, True) == ws_pingpong.Turns(2)
    assert ws_pingpong.turns_for(384, 64, True) == ws_pingpong.Turns(3)
    assert ws_pingpong.turns_for(128, 8, True) is None
    assert ws_pingpong.turns_for(256, 8, False) is None
    # unset: off at every trip count (no gain that held on the H200: ws_pingpong.WS_PINGPONG_MAX_BLOCKS)
    for trips in (E.const(1), E.const(4), E.const(32), 128, n):
        assert ws_pingpong.turns_for(256, trips, None) is None
    # one consumer warpgroup (128 threads): nothing to take turns with
    one = lower(_fa(1, 2, 256, 64, False, 1, 64, 64, 2, 128), SM90, {**WS_ON, **PP}).script()
    assert "named_barrier_arrive" not in one and "empty_late" in one
    # the plain split (causal by default) and TmaPipeline's loop are left as they are
    for case, cfg in (((1, 2, 512, 128, True, 1, 128, 128, 2, 256), PP),
                      ((1, 2, 512, 128, False, 1, 128, 128, 2, 256), {**PP, "tl.disable_warp_specialized": True})):
        assert "named_barrier_arrive" not in lower(_fa(*case), SM90, cfg).script()


def test_the_pass_config_turns_it_on_and_off_and_the_trace_shows_it():
    f = _fa(1, 2, 512, 128, False, 1, 128, 128, 2, 256)
    on, off = lower(f, SM90, PP), lower(f, SM90, NO_PP)
    assert "named_barrier_arrive" in on.script() and "named_barrier_arrive" not in off.script()
    assert "named_barrier_arrive" not in lower(f, SM90, {}).script()  # off by default
    after = trace(f, target="cuda:sm_90a", pass_configs=PP)["WarpSpecialize"].ir
    assert "tl::named_barrier_arrive" in after and "ws_pingpong" in after


@needs_compiler
def test_pingpong_compiles_with_no_spills_and_no_serialized_wgmma(tmp_path):
    with config.override(cache_dir=str(tmp_path)):
        k = tegula.compile(_fa(4, 16, 4096, 128, False, 1, 128, 128, 2, 256), out_idx=[-1], target="cuda:sm_90a",
                           pass_configs={**PP, PassConfigKey.TL_ENABLE_PTXAS_VERBOSE_OUTPUT: True})
    src = k.get_kernel_source()
    loop = src[src.index("for (int kb_1 = 1"):]
    assert "tl::named_barrier_sync((tx >> 7) + 9, 256);" in loop
    assert "tl::named_barrier_arrive((((tx >> 7) + 1) & 1) + 9, 256);" in loop
    log = k.artifact.metadata["log"]
    if "registers" not in log:
        pytest.skip("the compiler gave no resource report")
    assert "0 bytes spill stores, 0 bytes spill loads" in log and "0 bytes stack frame" in log, log
    for warning in ("C7507", "C7518", "C7517", "wgmma.wait_group is injected"):
        assert warning not in log, log


PP_CASES = [  # batch, heads, seq_len, dim, causal, groups, block_M, block_N, stages, threads
    (1, 1, 256, 64, False, 1, 128, 64, 2, 256),     # 4 key blocks
    (1, 2, 200, 64, True, 1, 128, 64, 2, 256),      # causal, ragged: the trip count differs per block
    (1, 1, 64, 64, False, 1, 128, 64, 2, 256),      # one key block: no turn is taken
    (1, 4, 192, 32, False, 2, 128, 32, 3, 256),     # GQA, 3 stages
    (1, 1, 256, 128, False, 1, 128, 128, 2, 256),   # d128, the bench's tiles
]


@pytest.mark.parametrize("case", PP_CASES, ids=lambda c: "-".join(map(str, c)))
def test_pingpong_on_the_hopper_emulator_matches_float64(case, rng):
    """Each consumer warpgroup runs as a task of its own, waiting at its turn's bar.sync until the
    other arrived with bar.arrive; every phase balances by the end of the block."""
    _emulated(case, {**WS_ON, **PP}, ("named_barrier_arrive", "empty_late"), rng)


@pytest.mark.gpu
@pytest.mark.parametrize("dim, bm, bn, stages", [(128, 128, 128, 2), (64, 128, 64, 2)])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("seq", [300, 1024])
def test_pingpong_on_gpu(dim, bm, bn, stages, causal, seq):
    _on_gpu((dim, bm, bn, stages, 256, causal, seq), {**WS_ON, **PP}, "named_barrier_arrive")
