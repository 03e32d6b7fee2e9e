"""tegula.autotune on the interpreter and on compile-only CUDA: the best configuration by timing,
configurations that fail skipped with a reason, the best choice reused from the disk cache."""
import numpy as np
import pytest

import tegula
import tegula.language as T
from tegula import config
from tegula.autotuner import tuner
from tegula.errors import ArgumentError, TegulaError

CONFIGS = [{"block_M": 16}, {"block_M": 32}, {"block_M": 64}]
FAKE_MS = {16: 3.0, 32: 1.0, 64: 2.0}


def scale_factory(M, N, block_M=16, bug=0):
    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), B: T.Tensor((M, N), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            t = T.alloc_fragment((block_M, N), "float32")
            T.copy(A[bx * block_M, 0], t)
            for i, j in T.Parallel(block_M, N):
                t[i, j] = t[i, j] * 2 + bug
            T.copy(t, B[bx * block_M, 0])

    return main


def gemm_factory(M, N, K, block_M=64, block_N=64, block_K=32, num_stages=2):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M), threads=128) as (bx, by):
            A_s = T.alloc_shared((block_M, block_K), "float16")
            B_s = T.alloc_shared((block_K, block_N), "float16")
            acc = T.alloc_fragment((block_M, block_N), "float32")
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_s)
                T.copy(B[k * block_K, bx * block_N], B_s)
                T.gemm(A_s, B_s, acc)
            T.copy(acc, C[by * block_M, bx * block_N])

    return main


@pytest.fixture
def cache_dir(tmp_path):
    with config.override(cache_dir=str(tmp_path / "cache"), disable_cache=False):
        yield tmp_path / "cache"


@pytest.fixture
def fake_timing(monkeypatch):
    """Deterministic timings by block_M; records every kernel timed."""
    timed = []

    def measure(kernel, inputs, warmup, rep):
        timed.append(dict(kernel.config))
        inputs()  # the inputs the profiler would use exist and match the kernel
        return FAKE_MS[kernel.config["block_M"]]

    monkeypatch.setattr(tuner, "measure", measure)
    return timed


def _scale(**kw):
    kw.setdefault("configs", CONFIGS)
    return tegula.autotune(**kw)(tegula.jit(out_idx=[-1], target="cpu")(scale_factory))


def test_cpu_best_config_by_timing_and_checked(cache_dir, fake_timing, capsys):
    f = _scale(ref_prog=lambda a: a * 2)
    k = f(64, 32)
    assert k.config == {"block_M": 32} and k.latency == 1.0
    assert sorted(c["block_M"] for c in fake_timing) == [16, 32, 64]
    a = np.random.default_rng().standard_normal((64, 32)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(k(a)), a * 2, rtol=1e-6)
    err = capsys.readouterr().err
    assert "autotune scale_factory [" in err and "3/3" in err and "best {'block_M': 32}" in err
    assert f(64, 32) is k  # tuned once per argument tuple


def test_real_timing_on_the_interpreter(cache_dir):
    k = _scale(warmup=1, rep=1, progress=False)(32, 16)
    assert k.config in CONFIGS and k.latency > 0
    assert [r["latency"] > 0 for r in k.autotune_results] == [True, True, True]


def test_bad_configs_are_skipped_with_a_reason(cache_dir, fake_timing, capsys):
    configs = [{"block_M": 16, "bug": 1}, {"block_M": 32, "bug": 0}, {"block_M": 64, "bug": 0},
               {"block_M": 16, "bug": "x"}]
    k = _scale(configs=configs, ref_prog=lambda a: a * 2)(64, 32)
    assert k.config == {"block_M": 32, "bug": 0}
    err = capsys.readouterr().err
    skipped = [line for line in err.splitlines() if "skipped" in line]
    assert len(skipped) == 2
    assert "{'block_M': 16, 'bug': 1}: wrong results" in skipped[0] or \
           "{'block_M': 16, 'bug': 1}: wrong results" in skipped[1]
    assert any("'bug': 'x'}: " in s and "Error" in s for s in skipped)
    errors = [r["error"] for r in k.autotune_results]
    assert errors[1] is None and errors[2] is None and errors[0].startswith("wrong results")


def test_second_process_reuses_the_cached_choice(cache_dir, fake_timing):
    k1 = _scale()(64, 32)
    assert len(fake_timing) == 3
    fresh = tegula.autotune(configs=CONFIGS)(tegula.jit(out_idx=[-1], target="cpu")(scale_factory))
    k2 = fresh(64, 32)
    assert len(fake_timing) == 3  # nothing timed again
    assert k2 is not k1 and k2.config == k1.config == {"block_M": 32} and k2.latency == 1.0
    assert len(fresh.jit_function._cache) == 1  # only the best configuration was built
    # other arguments are another tuning problem
    fresh(128, 32)
    assert len(fake_timing) == 6


def test_disabled_cache_tunes_again(cache_dir, fake_timing):
    _scale()(64, 32)
    with config.override(disable_cache=True):
        _scale()(64, 32)
    assert len(fake_timing) == 6


def test_configs_function_and_explicit_arguments(cache_dir, fake_timing):
    f = _scale(configs=lambda M, N: [{"block_M": b} for b in (16, 64) if b <= M])
    assert f(32, 16).config == {"block_M": 16}
    assert f(64, 16).config == {"block_M": 64}
    # every tuned argument given: no tuning, the plain kernel
    n = len(fake_timing)
    k = f(64, 16, block_M=32)
    assert len(fake_timing) == n and not hasattr(k, "latency")


def test_bad_config_lists_are_argument_errors(cache_dir):
    with pytest.raises(ArgumentError, match="block_X"):
        _scale(configs=[{"block_X": 1}])(64, 32)
    with pytest.raises(ArgumentError, match="non-empty"):
        _scale(configs=[])(64, 32)


def test_every_config_failing_is_an_error(cache_dir, fake_timing):
    with pytest.raises(TegulaError, match="none of the 2 configurations"):
        _scale(configs=[{"bug": "x"}, {"bug": "y"}], progress=False)(64, 32)


def test_compile_only_cuda(cache_dir, monkeypatch, capsys):
    configs = [{"block_M": 64, "block_N": 64}, {"block_M": 32, "block_N": 64},
               {"block_M": 16, "block_N": 32},
               # 2 stages of 256x256 fp16 tiles: far beyond any GPU's shared memory
               {"block_M": 256, "block_N": 256, "block_K": 256}]
    f = tegula.autotune(configs=configs, skip_check=True)(
        tegula.jit(out_idx=[-1], target="cuda:sm_80")(gemm_factory))
    calls = []

    def no_inputs(kernel, inputs, warmup, rep):  # no GPU here: time without running
        calls.append(kernel.config)
        return FAKE_MS[kernel.config["block_M"]]

    monkeypatch.setattr(tuner, "measure", no_inputs)
    k = f(256, 256, 128)
    assert k.config == {"block_M": 32, "block_N": 64} and k.latency == 1.0
    assert "__global__" in k.get_kernel_source()
    err = capsys.readouterr().err
    assert "skipped {'block_M': 256, 'block_N': 256, 'block_K': 256}: ResourceError" in err
    assert len(calls) == 3


def _eager_scale(A, block=32, factor=2.0):
    M = T.const("M")
    A: T.Tensor((M,), "float32")
    B = T.empty((M,), "float32")
    with T.Kernel(T.ceildiv(M, block), threads=32) as bx:
        for i in T.Parallel(block):
            if bx * block + i < M:
                B[bx * block + i] = A[bx * block + i] * factor
    return B


def test_autotune_over_an_eager_function_tunes_on_the_call_tensors(monkeypatch, rng, capsys):
    """Calling an autotuned eager function runs every configuration on the call's own tensors,
    keeps the fastest for those shapes and returns its outputs."""
    timed = []
    fake = {16: 3.0, 32: 1.0, 64: 2.0}

    def fake_measure(kernel, inputs, warmup, rep):
        ins = inputs()
        assert ins[0] is a  # the call's tensor, not a random one
        timed.append(kernel.config["block"])
        return fake[kernel.config["block"]]

    monkeypatch.setattr(tuner, "measure", fake_measure)
    f = tegula.autotune(configs=[{"block": b} for b in (16, 32, 64)], ref_prog=lambda x: x * 3.0)(
        tegula.jit(target="cpu")(_eager_scale))
    a = rng.standard_normal(100).astype(np.float32)
    out = f(a, factor=3.0)
    np.testing.assert_allclose(out, a.astype(np.float64) * 3.0, rtol=1e-6)
    assert sorted(timed) == [16, 32, 64]
    assert "best {'block': 32}" in capsys.readouterr().err
    out2 = f(a + 1, factor=3.0)  # same shapes: no tuning again
    assert len(timed) == 3
    np.testing.assert_allclose(out2, (a.astype(np.float64) + 1) * 3.0, rtol=1e-6)
    # every tuned argument given: no tuning at all
    np.testing.assert_allclose(f(a, block=64, factor=3.0), a.astype(np.float64) * 3.0, rtol=1e-6)
    assert len(timed) == 3


def test_autotune_eager_wrong_configuration_is_skipped(monkeypatch, rng, capsys):
    monkeypatch.setattr(tuner, "measure", lambda kernel, inputs, warmup, rep: float(kernel.config["block"]))
    # the reference disagrees with factor=2 unless... every configuration is checked against it
    f = tegula.autotune(configs=[{"block": 16, "factor": 2.0}, {"block": 32, "factor": 5.0}],
                        ref_prog=lambda x: x * 5.0)(tegula.jit(target="cpu")(_eager_scale))
    a = rng.standard_normal(64).astype(np.float32)
    np.testing.assert_allclose(f(a), a.astype(np.float64) * 5.0, rtol=1e-6)
    assert "skipped {'block': 16, 'factor': 2.0}: wrong results" in capsys.readouterr().err


def test_set_autotune_inputs_are_the_tuning_inputs(cache_dir, monkeypatch, rng):
    seen = []
    monkeypatch.setattr(tuner, "measure", lambda kernel, inputs, warmup, rep: seen.append(inputs()) or 1.0)
    f = tegula.autotune(configs=[{"block_M": 32}, {"block_M": 64}], skip_check=True)(
        tegula.jit(out_idx=[-1], target="cpu")(gemm_factory))
    a = rng.standard_normal((64, 64)).astype(np.float16)
    b = rng.standard_normal((64, 64)).astype(np.float16)
    with tegula.autotuner.set_autotune_inputs(a, b):
        f(64, 64, 64)
    assert len(seen) == 2 and all(s[0] is a and s[1] is b for s in seen)


def test_autotune_compile_of_an_eager_function(monkeypatch, rng):
    """``f.compile(M=...)`` tunes ahead of time on random inputs of those shapes."""
    timed = []

    def fake_measure(kernel, inputs, warmup, rep):
        assert tuple(inputs()[0].shape) == (96,)
        timed.append(kernel.config["block"])
        return {16: 2.0, 32: 1.0}[kernel.config["block"]]

    monkeypatch.setattr(tuner, "measure", fake_measure)
    f = tegula.autotune(configs=[{"block": 16}, {"block": 32}], ref_prog=lambda x: x * 2.0)(
        tegula.jit(target="cpu")(_eager_scale))
    k = f.compile(M=96)
    assert k.config == {"block": 32} and k.latency == 1.0 and sorted(timed) == [16, 32]
    assert f.compile(M=96) is k  # remembered
    a = rng.standard_normal(96).astype(np.float32)
    np.testing.assert_allclose(k(a), a.astype(np.float64) * 2.0, rtol=1e-6)
    np.testing.assert_allclose(f.compile(M=96, block=16)(a), a.astype(np.float64) * 2.0, rtol=1e-6)


def test_candidates_build_with_the_jit_functions_pipeline(cache_dir, fake_timing):
    from tegula.ir import expr as E
    from tegula.ir.visitor import Mutator
    from tegula.transform import Pass, pipeline_for

    class Triple(Mutator):
        def visit_Const(self, c):
            return E.const(3.0, c.dtype) if c.dtype.is_float and c.value == 2.0 else c

    p = pipeline_for("cpu").insert_after("input", Pass("Triple", lambda f: Triple().visit(f)))
    f = tegula.autotune(configs=CONFIGS, ref_prog=lambda a: a * 3)(
        tegula.jit(out_idx=[-1], target="cpu", pipeline=p)(scale_factory))
    k = f(64, 32)
    assert k.pipeline is p and all(r["error"] is None for r in k.autotune_results)
    a = np.random.default_rng().standard_normal((64, 32)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(k(a)), a.astype(np.float64) * 3, rtol=1e-6)


def test_a_tuned_argument_given_builds_without_searching(cache_dir, fake_timing, rng):
    """TileLang's rule: a call that gives any tuned argument searches nothing; the defaults fill
    the tuned arguments it leaves out."""
    f = _scale(configs=[{"block_M": 16, "bug": 0}, {"block_M": 32, "bug": 0}])
    k = f(64, 32, block_M=32)  # bug left out: its default (0)
    assert fake_timing == [] and not hasattr(k, "latency")
    a = rng.standard_normal((64, 32)).astype(np.float32)
    np.testing.assert_allclose(np.asarray(k(a)), a.astype(np.float64) * 2, rtol=1e-6)
    k2 = f(64, 32, 16)  # positionally too
    assert fake_timing == [] and not hasattr(k2, "latency")
    np.testing.assert_allclose(np.asarray(k2(a)), a.astype(np.float64) * 2, rtol=1e-6)


def test_a_tuned_argument_given_without_a_default_for_the_rest_is_an_error(cache_dir, fake_timing):
    def factory(M, N, block_M, bug=0):
        return scale_factory(M, N, block_M, bug)

    f = tegula.autotune(configs=[{"block_M": 16, "bug": 0}])(tegula.jit(out_idx=[-1], target="cpu")(factory))
    with pytest.raises(ArgumentError, match=r"gives the tuned argument\(s\) bug.*block_M has no default"):
        f(64, 32, bug=1)


@pytest.mark.parametrize("target", ["cpu", "cuda-emu"])
def test_autotune_compile_with_a_tuned_argument_given_builds_that_config(monkeypatch, rng, target):
    """``f.compile(M=.., block=..)`` with ``factor`` (tuned, with a default) left out builds
    block=16 with the default factor and times nothing."""
    timed = []
    monkeypatch.setattr(tuner, "measure", lambda kernel, inputs, warmup, rep: timed.append(1) or 1.0)
    f = tegula.autotune(configs=[{"block": 16, "factor": 3.0}, {"block": 32, "factor": 5.0}])(
        tegula.jit(target=target)(_eager_scale))
    k = f.compile(M=96, block=16)
    assert timed == [] and not hasattr(k, "latency")
    a = rng.standard_normal(96).astype(np.float32)
    np.testing.assert_allclose(k(a), a.astype(np.float64) * 2.0, rtol=1e-6)  # the default factor
    # and calling with a tensor and one tuned argument runs that configuration
    np.testing.assert_allclose(f(a, factor=5.0), a.astype(np.float64) * 5.0, rtol=1e-6)
    assert timed == []
