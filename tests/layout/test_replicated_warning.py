"""A fragment that layout inference can only replicate (every thread holds all of it) is a located
PerformanceWarning past ``config.replicated_fragment_limit`` elements, naming the buffer, the
thread count and a fix; under ``TEGULA_STRICT_PERF`` it is a LayoutError."""
import math
import os
import sys
import warnings

import numpy as np
import pytest

import tegula
import tegula.tools
from tegula import config
from tegula.errors import LayoutError, PerformanceWarning

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
from softmax import reference, softmax  # noqa: E402

SOFTMAX_LINE = next(i for i, ln in enumerate(open(sys.modules["softmax"].__file__), 1)
                    if "x = T.alloc_fragment((block_M, N)" in ln)


def _build(N, target="cuda-emu", **kw):
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        if target.startswith("cuda:"):   # lowering only: NVRTC takes minutes on 1200 registers a thread
            k = tegula.tools.trace(softmax(N, **kw), target=target)
        else:
            k = tegula.compile(softmax(N, **kw), out_idx=[-1], target=target)
    return k, [w for w in got if issubclass(w.category, PerformanceWarning)]


@pytest.mark.parametrize("target", ["cuda-emu", "cuda:sm_80", "cuda:sm_90a"])
def test_softmax_of_300_columns_on_128_threads_warns_at_the_fragment(target):
    _, got = _build(300, target, block_M=4)
    assert len(got) == 1
    w = got[0]
    msg = str(w.message)
    assert "fragment 'x' (4, 300) is replicated over all 128 threads" in msg
    assert "every thread holds all 1200 elements" in msg
    assert f"softmax.py:{SOFTMAX_LINE}" in msg and "T.alloc_fragment((block_M, N), accum_dtype)" in msg
    assert "pad the last dimension to 320" in msg and "threads=16" in msg
    assert w.filename.endswith("softmax.py") and w.lineno == SOFTMAX_LINE   # the user's line


@pytest.mark.parametrize("rows,cols,threads", [(4, 300, 128), (2, 100, 64), (3, 70, 256)])
def test_the_suggested_padding_spreads_the_tile(rows, cols, threads, rng):
    _, got = _build(cols, block_M=rows, threads=threads)
    assert len(got) == 1
    msg = str(got[0].message)
    padded = int(msg.split("pad the last dimension to ")[1].split(" ")[0])
    assert padded >= cols and (rows * padded) % threads == 0
    assert padded - cols < threads // math.gcd(threads, rows)   # the nearest such width
    k, none = _build(padded, block_M=rows, threads=threads)
    assert none == []
    x = rng.standard_normal((2 * rows, padded)).astype(np.float16)
    np.testing.assert_allclose(k(x).astype(np.float64), reference(x), rtol=2e-3, atol=2e-3)


def test_tiles_that_spread_and_tiny_ones_are_quiet():
    for N in (256, 320):
        assert _build(N, block_M=4)[1] == []
    assert _build(16, block_M=2, threads=128)[1] == []   # 32 elements: under the limit
    with config.override(replicated_fragment_limit=16):
        assert len(_build(16, block_M=2, threads=128)[1]) == 1


def test_strict_setting_makes_it_a_located_layout_error():
    with config.override(strict_performance=True), pytest.raises(LayoutError) as e:
        _build(300, block_M=4)
    msg = str(e.value)
    assert "fragment 'x' (4, 300) is replicated over all 128 threads" in msg
    assert f"softmax.py:{SOFTMAX_LINE}" in msg and "TEGULA_STRICT_PERF" in msg


def test_settings_come_from_the_environment():
    s = config.from_env({"TEGULA_STRICT_PERF": "1", "TEGULA_REPLICATED_LIMIT": "200"})
    assert s.strict_performance and s.replicated_fragment_limit == 200
    assert not config.from_env({}).strict_performance
    with pytest.raises(tegula.errors.ConfigError, match="TEGULA_REPLICATED_LIMIT"):
        config.from_env({"TEGULA_REPLICATED_LIMIT": "many"})
