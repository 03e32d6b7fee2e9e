"""``tilelang.testing``: skip marks with their reasons, seeds, regression scripts, torch_assert_close."""
import random

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="needs torch (pip install -e '.[torch]')")

from tegula.compat import device, testing
from tegula.errors import ArgumentError


def _skip_reason(mark):
    """(skipped?, reason) of a pytest.mark.skipif decorator."""
    m = mark.mark
    return bool(m.args[0]), m.kwargs["reason"]


@pytest.mark.parametrize("have,mode,want,runs", [
    ((9, 0), "eq", (9, 0), True), ((8, 0), "eq", (9, 0), False),
    ((9, 0), "ge", (8, 9), True), ((8, 6), "ge", (8, 9), False),
    ((9, 0), "gt", (9, 0), False), ((10, 0), "gt", (9, 0), True),
    ((8, 9), "le", (8, 9), True), ((9, 0), "le", (8, 9), False),
    ((8, 0), "lt", (8, 6), True), ((8, 6), "lt", (8, 6), False)])
def test_compute_version_marks(monkeypatch, have, mode, want, runs):
    monkeypatch.setattr(device, "cuda_available", lambda: True)
    monkeypatch.setattr(device, "compute_capability", lambda d=0: have)
    short = getattr(testing, f"requires_cuda_compute_version_{mode}")(*want)
    long = testing.requires_cuda_compute_version(want[0], want[1], mode)
    for mark in (short, long):
        skipped, reason = _skip_reason(mark)
        assert skipped is not runs
        assert f"{mode} {want[0]}.{want[1]}" in reason and f"{have[0]}.{have[1]}" in reason


def test_marks_without_a_gpu(monkeypatch):
    monkeypatch.setattr(device, "cuda_available", lambda: False)
    skipped, reason = _skip_reason(testing.requires_cuda_compute_version_ge(8, 0))
    assert skipped and "needs a CUDA GPU" in reason
    assert _skip_reason(testing.requires_cuda()) == (True, "needs a CUDA GPU")

    @testing.requires_cuda
    def f():
        pass

    assert f.pytestmark[0].kwargs["reason"] == "needs a CUDA GPU"
    with pytest.raises(ArgumentError, match="mode must be one of"):
        testing.requires_cuda_compute_version(9, 0, "gte")


def test_requires_package():
    assert _skip_reason(testing.requires_package("numpy")) == (False, "needs the package(s) ")
    skipped, reason = _skip_reason(testing.requires_package("numpy", "no_such_pkg_xyz"))
    assert skipped and reason == "needs the package(s) no_such_pkg_xyz"


def test_set_random_seed_is_deterministic():
    draws = []
    for _ in range(2):
        testing.set_random_seed(1234)
        draws.append((random.random(), np.random.rand(), float(torch.rand(1))))
    assert draws[0] == draws[1]
    testing.set_random_seed(4321)
    assert (random.random(), np.random.rand(), float(torch.rand(1))) != draws[0]


def regression_fast():
    testing.process_func(lambda n=1: 0.5 * n, "fast", n=3)


def regression_named():
    testing.process_func(_timed)


def _timed():
    return 2.25


def not_a_regression():
    raise AssertionError("must not run")


def test_process_func_and_regression(capsys):
    rows = testing.regression()
    assert rows == [("fast", 1.5), ("_timed", 2.25)]
    out = capsys.readouterr().out
    assert "latency (ms)" in out and "fast" in out and "2.2500" in out
    with pytest.raises(ArgumentError, match="returned str"):
        testing.process_func(lambda: "x")


def test_torch_assert_close_allows_a_fraction(rng):
    a = torch.from_numpy(rng.standard_normal(1000))
    b = a.clone()
    b[:3] += 1.0  # 0.3% of the elements
    testing.torch_assert_close(a, b, rtol=1e-3, atol=1e-3, max_mismatched_ratio=0.005)
    with pytest.raises(AssertionError, match=r"3 of 1000 elements \(0.3000%\) differ") as ei:
        testing.torch_assert_close(a, b, rtol=1e-3, atol=1e-3, max_mismatched_ratio=0.001)
    assert "first at (0,)" in str(ei.value)
    with pytest.raises(AssertionError, match="shape mismatch"):
        testing.torch_assert_close(a, b[:10])
    with pytest.raises(AssertionError, match="dtype mismatch"):
        testing.torch_assert_close(a, b.float())
    nan = torch.tensor([float("nan"), 1.0])
    testing.torch_assert_close(nan, nan.clone(), max_mismatched_ratio=0)
    with pytest.raises(AssertionError):
        testing.torch_assert_close(nan, nan.clone(), equal_nan=False, max_mismatched_ratio=0)
