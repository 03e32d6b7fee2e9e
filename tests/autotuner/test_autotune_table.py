"""autotune prints and returns a table of every configuration tried: its measured time, the
Analyzer's predicted time and bound beside it (for this process's GPU, else the H200), and why a
configuration was skipped."""
import numpy as np
import pytest

import tegula
from tegula import config
from tegula.autotuner import tuner
from tegula.tools import Analyzer   # importing the tools installs the Analyzer's predictions
from tegula.tools.analyzer import analysis_device

from test_autotune import gemm_factory

CONFIGS = [{"block_M": 32, "block_N": 32}, {"block_M": 64, "block_N": 64}, {"block_M": 64, "block_N": 32},
           {"block_M": 48, "block_N": 64}]   # 48: T.gemm's warp grid refuses it


def _ref(a, b):   # numpy or torch inputs (the profiler makes torch tensors when torch is there)
    return np.asarray(a, dtype=np.float64) @ np.asarray(b, dtype=np.float64)


@pytest.fixture
def isolated(tmp_path):
    with config.override(cache_dir=str(tmp_path / "cache"), disable_cache=True):
        yield


def test_the_table_has_every_config_with_time_and_prediction(isolated, capsys, rng):
    tuned = tegula.autotune(configs=CONFIGS, ref_prog=_ref, warmup=1, rep=2)(
        tegula.jit(out_idx=[-1], target="cpu")(gemm_factory))
    k = tuned(128, 128, 64)
    res = k.autotune_results
    assert [r["config"] for r in res] == CONFIGS
    device = analysis_device()
    for r in res:
        if r["latency"] is None:
            continue
        want = Analyzer.analysis(gemm_factory(128, 128, 64, **r["config"]), device)
        assert r["predicted"] == pytest.approx(want.estimated_time * 1e3) and r["bound"] == want.bound
        assert r["latency"] > 0
    timed = [r for r in res if r["latency"] is not None]
    assert len(timed) >= 3 and k.latency == min(r["latency"] for r in timed)
    # a 128x128 output in 64x64 tiles is 4 blocks on 132 SMs, in 32x32 tiles 16: the prediction
    # says the smaller tiles win here (more SMs at work), whatever the interpreter measured
    by = {tuple(r["config"].values()): r["predicted"] for r in timed}
    assert by[(32, 32)] < by[(64, 32)] < by[(64, 64)]
    table = k.autotune_table
    lines = table.splitlines()
    assert lines[0].split()[:4] == ["block_M", "block_N", "measured", "ms"] and "predicted ms" in lines[0]
    assert len(lines) == 1 + len(CONFIGS)
    for r in timed:
        assert f"{r['latency']:.4f}" in table and f"{r['predicted']:.4g}" in table
    fastest = lines[1].split()
    assert (int(fastest[0]), int(fastest[1])) == tuple(k.config.values())   # fastest first
    err = capsys.readouterr().err
    assert table in err   # printed as well as returned
    np.testing.assert_allclose(np.asarray(k(*(rng.standard_normal(s).astype(np.float16)
                                              for s in ((128, 64), (64, 128))))).shape, (128, 128))


def test_without_a_predictor_the_table_says_so(isolated, monkeypatch):
    monkeypatch.setattr(tuner, "PREDICTOR", None)
    tuned = tegula.autotune(configs=CONFIGS[:2], warmup=1, rep=2, progress=False)(
        tegula.jit(out_idx=[-1], target="cpu")(gemm_factory))
    k = tuned(64, 64, 32)
    assert all(r["predicted"] is None for r in k.autotune_results)
    assert k.autotune_table.splitlines()[1].split()[3] == "-"


def test_format_table_names_skipped_configs():
    text = tuner.format_table([
        {"config": {"block_M": 64}, "latency": 0.5, "predicted": 0.25, "bound": "L2", "error": None},
        {"config": {"block_M": 256}, "latency": None, "predicted": None, "bound": None,
         "error": "ResourceError: shared memory 300 KB > 227 KB"}], "H200")
    rows = text.splitlines()
    assert "predicted ms (H200)" in rows[0]
    assert rows[1].split()[:4] == ["64", "0.5000", "0.25", "L2"]
    assert rows[2].split()[:4] == ["256", "-", "-", "-"] and "ResourceError" in rows[2]
