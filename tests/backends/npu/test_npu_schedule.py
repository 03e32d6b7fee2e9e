"""AutoSchedule: modulo schedules of the GEMM and flash-attention examples with z3 and with the
list scheduler, the II against its lower bound, buffer versions, infeasible requests, hints, and
every schedule run on the emulator's adversarial pipe order against float64."""
import time

import numpy as np
import pytest

import tegula
import tegula.language as T
from tegula.errors import ConfigError, KernelTypeError, ResourceError
from tegula.backends.npu.sched import schedules
from tegula.backends.npu.sched import solvers as S
from tegula.backends.npu.sched.tasks import Dep, Problem, Task

SOLVERS = [pytest.param("z3", marks=pytest.mark.needs("z3")), "list"]


def _cfg(solver, seed=0):
    return {"tl.ascend_auto_sync": True, "tegula.npu_scheduler": solver, "tegula.npu_emu_seed": seed}


def _loop(kernel):
    (s,) = [s for s in schedules(kernel) if s.where.startswith("loop")]
    return s.schedule


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("stages", [1, 2, 3])
def test_gemm_ii_is_within_10_percent_of_its_bound_and_runs_race_free(ascend_example, solver, stages):
    g = ascend_example("gemm")
    rng = np.random.default_rng()
    a = rng.standard_normal((128, 256)).astype(np.float16)
    b = rng.standard_normal((256, 128)).astype(np.float16)
    ref = a.astype(np.float64) @ b
    for seed in (0, 1, 2):   # three adversarial pipe orders per schedule
        k = tegula.compile(g.gemm(128, 128, 256, num_stages=stages), target="ascend-emu:a2a3",
                           pass_configs=_cfg(solver, seed))
        c = np.full((128, 128), np.nan, np.float16)
        k(a, b, c)
        np.testing.assert_allclose(c.astype(np.float64), ref, rtol=2e-3, atol=3e-2)
    s = _loop(k)
    assert s.bound == max(s.res_mii, s.rec_mii)
    assert s.bound <= s.ii <= 1.10 * s.bound
    # the tiles loaded from GM get exactly num_stages versions in the A2/A3 dialect
    assert s.versions["A_L1"] == stages and s.versions["B_L1"] == stages


def test_more_versions_lower_the_gemm_ii(ascend_example):
    g = ascend_example("gemm")
    iis = [_loop(tegula.compile(g.gemm(128, 128, 256, num_stages=n), target="ascend-emu:a2a3",
                                pass_configs=_cfg("auto"))).ii for n in (1, 2, 3)]
    assert iis[0] > iis[1] > iis[2]


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("stages", [1, 2])
def test_flash_attention_ii_is_within_10_percent_and_runs_race_free(ascend_example, solver, stages):
    fa = ascend_example("flash_attention")
    for seed in (0, 1):
        k = tegula.compile(fa.flash_attention(128, 64, num_stages=stages), target="ascend-emu:a2a3",
                           pass_configs=_cfg(solver, seed))
        rng = np.random.default_rng()
        q, kk, v = (rng.standard_normal((128, 64)).astype(np.float16) for _ in range(3))
        ws, wp, wo = (np.zeros((4, 32, 32), np.float32), np.zeros((4, 32, 32), np.float16),
                      np.zeros((4, 32, 64), np.float32))
        o = np.full((128, 64), np.nan, np.float16)
        k(q, kk, v, ws, wp, wo, o)
        assert np.abs(o.astype(np.float64) - fa.reference(q, kk, v)).max() < 1e-2
    s = _loop(k)
    assert s.bound <= s.ii <= 1.10 * s.bound
    assert s.stages >= 1 and all(0 <= s.stage(t) < s.stages for t in s.start)


@pytest.mark.needs("z3")
def test_flash_attention_compiles_in_two_seconds_with_z3(ascend_example):
    fa = ascend_example("flash_attention")
    f = fa.flash_attention(128, 64, num_stages=2)
    t = time.process_time()   # CPU time: the machine may be shared; z3 runs in this process
    k = tegula.compile(f, target="ascend-emu:a2a3", pass_configs=_cfg("z3"))
    dt = time.process_time() - t
    assert _loop(k).solver in ("z3", "list")
    assert dt <= 2.0, dt


def test_infeasible_versions_are_a_located_error_with_a_hint(ascend_example):
    g = ascend_example("gemm")
    # 128 x 256 and 256 x 128 fp16 tiles: 128 KB of L1 per version, L0A / L0B full at one
    f = g.gemm(256, 256, 1024, block_M=128, block_N=128, block_K=256, num_stages=5)
    with pytest.raises(ResourceError) as e:
        tegula.compile(f, target="ascend-emu:a2a3", pass_configs=_cfg("list"))
    msg = str(e.value)
    assert "infeasible: L1 needs 655360 bytes > 524288 at 5 versions of A_L1 and B_L1; " \
           "try num_stages=4" in msg
    line = next(i for i, t in enumerate(open(g.__file__).read().splitlines(), 1) if "T.Pipelined" in t)
    assert f"gemm.py:{line}" in msg   # the T.Pipelined line
    tegula.compile(g.gemm(256, 256, 1024, block_M=128, block_N=128, block_K=256, num_stages=4),
                   target="ascend-emu:a2a3", pass_configs=_cfg("list"))


def _hinted(latency=None, stage=None, versions=None):
    @T.prim_func
    def k(A: T.Tensor((64, 256), "float16"), B: T.Tensor((256, 64), "float16"),
          C: T.Tensor((64, 64), "float16")):
        with T.Kernel(1) as bx:
            a = T.alloc_l1((64, 64), "float16")
            b = T.alloc_l1((64, 64), "float16")
            c = T.alloc_l0c((64, 64), "float32")
            if versions:
                T.annotate_buffer_versions({a: versions, b: versions})
            with T.Cube():
                for i in T.Pipelined(4, num_stages=3):
                    if latency:
                        with T.Task(latency=latency, ii=latency):
                            T.copy(A[0, i * 64], a)
                    else:
                        T.copy(A[0, i * 64], a)
                    if stage is not None:
                        with T.Stage(stage):
                            T.copy(B[i * 64, 0], b)
                    else:
                        T.copy(B[i * 64, 0], b)
                    T.gemm(a, b, c, clear_accum=(i == 0))
                T.copy(c, C)
    return k


@pytest.mark.parametrize("solver", SOLVERS)
def test_task_stage_and_version_hints_take_effect(solver):
    base = _loop(tegula.compile(_hinted(), target="ascend-emu:a5", pass_configs=_cfg(solver)))
    s = schedules(tegula.compile(_hinted(latency=5000), target="ascend-emu:a5",
                                 pass_configs=_cfg(solver)))[0]
    (t,) = [t for t in s.tasks if t.source == "T.Task"]
    assert t.latency == 5000 and t.ii == 5000 and s.schedule.ii >= 5000 > base.ii
    s = schedules(tegula.compile(_hinted(stage=2), target="ascend-emu:a5",
                                 pass_configs=_cfg(solver)))[0]
    (t,) = [t for t in s.tasks if t.stage == 2]
    assert s.schedule.stage(t.index) == 2
    k = tegula.compile(_hinted(versions=2), target="ascend-emu:a5", pass_configs=_cfg(solver))
    assert _loop(k).versions["a"] == 2 and _loop(k).versions["b"] == 2
    rng = np.random.default_rng()
    a = rng.standard_normal((64, 256)).astype(np.float16)
    b = rng.standard_normal((256, 64)).astype(np.float16)
    c = np.full((64, 64), np.nan, np.float16)
    k(a, b, c)
    np.testing.assert_allclose(c.astype(np.float64), a.astype(np.float64) @ b, rtol=2e-3, atol=3e-2)


def test_bad_hints_are_type_errors():
    with pytest.raises(KernelTypeError, match="T.Task: latency must be an integer >= 1"):
        T.Task(latency=0)
    with pytest.raises(KernelTypeError, match="T.Stage: k must be an integer >= 0"):
        T.Stage(-1)


def _toy(enable_offset=False):
    """Two loads on one MTE2 pipe feeding a vector op, a WAR ring on each buffer."""
    tasks = [Task(0, None, "V", "MTE2", 300, 40, "test", position=0),
             Task(1, None, "V", "MTE2", 300, 40, "test", position=1),
             Task(2, None, "V", "V", 100, 100, "test", position=2)]
    deps = [Dep(0, 2, 300), Dep(1, 2, 300), Dep(2, 0, 100, 1, "x"), Dep(2, 1, 100, 1, "y"),
            Dep(2, 2, 100, 1)]
    return Problem(tasks, deps, max_versions={"x": 3, "y": 3}, sizes={"x": ("ub", 1000), "y": ("ub", 1000)},
                   capacity={"ub": 10_000}, enable_offset=enable_offset)


@pytest.mark.parametrize("offset", [False, True])
@pytest.mark.needs("z3")
def test_z3_and_list_on_the_same_problem(offset):
    z, li = S.solve(_toy(offset), "z3"), S.solve(_toy(offset), "list")
    for s in (z, li):
        assert s.bound == max(s.res_mii, s.rec_mii) and s.bound <= s.ii <= 1.1 * s.bound
        for d in _toy().deps:   # every dependency holds with the versions chosen
            dist = s.versions[d.buffer] * d.distance if d.buffer else d.distance
            assert s.start[d.dst] - s.start[d.src] >= d.latency - s.ii * dist
    assert z.ii <= li.ii
    assert S.solve(_toy(offset), "z3").start == z.start   # deterministic


def test_capacity_bounds_the_versions():
    p = _toy()
    p.capacity = {"ub": 2000}   # one version each
    s = S.solve(p, "auto")
    assert s.versions == {"x": 1, "y": 1} and s.ii >= 400
    p2 = _toy()
    assert S.solve(p2, "auto").ii < s.ii


def test_without_z3_auto_uses_the_list_scheduler(ascend_example, monkeypatch):
    monkeypatch.setattr(S, "have_z3", lambda: False)
    g = ascend_example("gemm")
    k = tegula.compile(g.gemm(128, 128, 256, num_stages=2), target="ascend-emu:a2a3",
                       pass_configs={"tl.ascend_auto_sync": True})
    assert _loop(k).solver == "list"
    with pytest.raises(ConfigError, match="needs the z3-solver package"):
        tegula.compile(g.gemm(128, 128, 256, num_stages=2), target="ascend-emu:a2a3",
                       pass_configs=_cfg("z3"))
    with pytest.raises(ConfigError, match="'greedy' is not a scheduler"):
        tegula.compile(g.gemm(128, 128, 256, num_stages=2), target="ascend-emu:a2a3",
                       pass_configs=_cfg("greedy"))


def test_straight_line_code_gets_a_makespan_schedule():
    @T.prim_func
    def k(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32"),
          C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, is_npu=True) as (cid, vid):
            a = T.alloc_ub((32, 64), "float32")
            b = T.alloc_ub((32, 64), "float32")
            c = T.alloc_ub((32, 64), "float32")
            with T.Scope("V"):
                T.copy(A[vid * 32, 0], a)
                T.tile.exp(a, a)
                T.copy(B[vid * 32, 0], b)
                T.tile.add(c, a, b)
                T.copy(c, C[vid * 32, 0])
    rng = np.random.default_rng()
    a, b = (rng.standard_normal((64, 64)).astype(np.float32) for _ in range(2))
    for solver in ("auto", "list"):
        kern = tegula.compile(k, target="ascend-emu:a2a3", pass_configs=_cfg(solver))
        (s,) = schedules(kern)
        assert not s.schedule.loop
        seq = sum(t.latency for t in s.tasks)
        assert s.schedule.bound <= s.schedule.ii < seq   # the second load overlaps the exp
        c = np.full((64, 64), np.nan, np.float32)
        kern(a, b, c)
        np.testing.assert_allclose(c, np.exp(a) + b, rtol=1e-5, atol=1e-5)


# -- the timing model ----------------------------------------------------------------------------
def test_timing_model_double_buffering_is_faster_and_labelled(ascend_example, tmp_path):
    import json

    from tegula.backends.npu import cost
    from tegula.backends.npu.emu import timing

    g = ascend_example("gemm")
    times = []
    for stages in (1, 2):
        k = tegula.compile(g.gemm(256, 512, 1024, 128, 256, 64, num_stages=stages),
                           target="ascend-emu:a2a3", pass_configs=_cfg("auto"))
        t = timing.model(k)
        times.append(t)
        assert t.model == cost.MODEL_VERSION and "modelled" in t.summary()
        u = t.utilisation()
        assert 0 < u[("AIC", "M")] <= 1 and 0 < u[("AIC", "MTE2")] <= 1
        assert t.flops == 2.0 * 256 * 512 * 1024
        path = tmp_path / f"gemm{stages}.json"
        t.chrome_trace(str(path))
        doc = json.loads(path.read_text())
        assert doc["otherData"]["model"] == cost.MODEL_VERSION
        pipes = {e["tid"] for e in doc["traceEvents"] if e["ph"] == "X"}
        assert {"MTE2", "MTE1", "M", "FIX"} <= pipes
    assert times[1].cycles < 0.8 * times[0].cycles
    # the pipelined loop runs at about the schedule's II per iteration
    ii = _loop(tegula.compile(g.gemm(256, 512, 1024, 128, 256, 64, num_stages=2),
                              target="ascend-emu:a2a3", pass_configs=_cfg("auto"))).ii
    assert 16 * ii <= times[1].block_cycles <= 16 * ii + 6000


def test_modelled_gemm_4096_reaches_80_percent_of_cube_peak(ascend_example):
    from tegula.backends.npu.emu import timing
    from tegula.backends.npu.machine import machine

    g = ascend_example("gemm")
    k = tegula.compile(g.gemm(4096, 4096, 4096, 128, 256, 64, num_stages=2),
                       target="ascend-emu:a2a3", pass_configs=_cfg("auto"))
    t = timing.model(k)
    assert t.waves == 22 and t.grid == 512
    assert t.cube_peak_fraction(machine("a2a3")) >= 0.80


def test_cost_model_matches_the_published_mmad_counts_and_fits_tload():
    from tegula.backends.npu import calibration

    # profiled counts from shared/reference/ascend-instr-cycles.tsv
    assert calibration.model_cycles("TMatmul.half_40x50x60") == 54
    assert calibration.model_cycles("TMatmul.float_120x110x50") == 902
    assert calibration.model_cycles("TMatmul.int8_6x7x8") == 7
    for name, prof in [("TLoad.c01_nd_float_128x128", 776), ("TLoad.c04_nd_int16_128x127_padmax", 519),
                       ("TLoad.c08_nd_float_256x60_padmax", 2497), ("TAdd.float_64x64", 132),
                       ("TMul.float_64x64", 154), ("TAddS.float_256x16", 266)]:
        assert calibration.precision(prof, calibration.model_cycles(name)) >= 0.85, name


@pytest.mark.parametrize("stages", [4, 8])
def test_more_versions_than_ring_flag_ids_still_run_race_free(ascend_example, stages):
    # two forward edges MTE2 -> MTE1 at 4 or 8 versions need more than 8 ids: InsertSync falls
    # back to one ring per event, set right before its wait
    g = ascend_example("gemm")
    for seed in (0, 1):
        err = g.main(128, 128, 1024, target="ascend-emu:a2a3", seed=None, num_stages=stages)
        assert err < 2e-3


def test_the_scheduling_exercises_print_ii_feasibility_and_time(tmp_path):
    import os
    import re
    import subprocess
    import sys

    import tegula as tg

    root = os.path.dirname(os.path.dirname(os.path.abspath(tg.__file__)))
    script = os.path.join(root, "examples", "ascend", "scheduling.py")
    env = {**os.environ, "PYTHONPATH": root}

    def run(*args):
        r = subprocess.run([sys.executable, script, *args], capture_output=True, text=True, env=env,
                           timeout=600)
        assert r.returncode == 0, r.stderr
        return r.stdout
    out = run("gemm", "--size", "512", "--num-stages", "1", "2", "12")
    iis = [int(x) for x in re.findall(r" II +(\d+)  bound", out)]
    assert len(iis) == 2 and iis[1] < iis[0] and "modelled" in out
    assert re.search(r"num_stages=12 +INFEASIBLE +infeasible: L1 needs", out) and "try num_stages=" in out
    out = run("timeline", "--out", str(tmp_path))
    assert (tmp_path / "gemm-single-buffered.json").exists()
    assert (tmp_path / "gemm-double-buffered.json").exists()
    assert "tegula-npu-cost/1 (not measured)" in out


def test_a5_costs_come_from_the_950_table(ascend_example):
    from tegula.backends.npu import cost
    from tegula.backends.npu.emu import timing
    from tegula.backends.npu.machine import machine

    a5, a2 = machine("a5"), machine("a2a3")
    # 950 path costs: GM -> L1 base 190 at 100 B/cycle, II at least 64; cube base 8
    assert cost.copy_cost(a5, "global", "l1", 16384, 128, 128) == cost.Cost(354, 164, "a5-calibrated")
    assert cost.mmad_cost(a5, 128, 256, 64, type("D", (), {"bits": 16})).latency == 8 * 16 * 4 + 8
    assert cost.copy_cost(a2, "global", "l1", 16384, 128, 128).latency > 354
    g = ascend_example("gemm")
    ts = [timing.model(tegula.compile(g.gemm(256, 512, 1024, 128, 256, 64, num_stages=n),
                                      target="ascend-emu:a5", pass_configs=_cfg("auto")))
          for n in (1, 2)]
    assert all(t.machine == "a5" and t.clock_ghz == 1.65 for t in ts)
    assert ts[1].cycles < ts[0].cycles
