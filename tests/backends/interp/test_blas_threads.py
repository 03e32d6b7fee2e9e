"""The host backends hold numpy's BLAS to ``config.settings.blas_threads`` while a kernel runs.

Tile-sized products on several BLAS threads were five times slower on the 2-core development
machine under load (a corpus flash attention's kernel calls 18.5 s -> 3.5 s with one thread)."""

import numpy as np
import pytest

import tegula.language as T
from tegula import config
from tegula.backends import blas
from tegula.errors import ConfigError

RNG = np.random.default_rng()


def _uses_openblas() -> bool:
    deps = np.show_config(mode="dicts")["Build Dependencies"]
    return "openblas" in str(deps.get("blas", {}).get("name", "")).lower()


@T.prim_func
def _gemm(A: T.Tensor((64, 32), "float16"), B: T.Tensor((32, 48), "float16"),
          C: T.Tensor((64, 48), "float32")):
    with T.Kernel(1, threads=128) as _:
        A_s = T.alloc_shared((64, 32), "float16")
        B_s = T.alloc_shared((32, 48), "float16")
        C_l = T.alloc_fragment((64, 48), "float32")
        T.copy(A, A_s)
        T.copy(B, B_s)
        T.gemm(A_s, B_s, C_l, clear_accum=True)
        T.copy(C_l, C)


def _inputs() -> list:
    a = RNG.standard_normal((64, 32)).astype(np.float16)
    b = RNG.standard_normal((32, 48)).astype(np.float16)
    return [a, b, np.full((64, 48), np.nan, np.float32)]


def _ref(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a.astype(np.float64) @ b.astype(np.float64)


def test_openblas_is_found_when_numpy_uses_it() -> None:
    assert bool(blas.controls()) == _uses_openblas()


def _spy(prog_body_owner, monkeypatch) -> list:
    """Record the BLAS thread count each time ``owner.body`` runs."""
    get = blas.controls()[0]
    inner = prog_body_owner.body
    seen: list = []

    def body(env: list) -> None:
        seen.append(get())
        inner(env)
    monkeypatch.setattr(prog_body_owner, "body", body)
    return seen


@pytest.mark.skipif(not _uses_openblas(), reason="numpy is not built with OpenBLAS here")
def test_interpreter_runs_kernels_on_one_blas_thread(monkeypatch) -> None:
    from tegula.backends.interp import compile_func, execute

    get, set_ = blas.controls()
    before = get()
    set_(2)
    try:
        seen = _spy(compile_func(_gemm), monkeypatch)
        a, b, c = _inputs()
        execute(_gemm, [a, b, c])
        assert seen == [1]
        assert get() == 2  # given back after the kernel
        np.testing.assert_allclose(c, _ref(a, b), rtol=1e-5, atol=1e-4)
        with config.override(blas_threads=0):
            execute(_gemm, _inputs())
        assert seen == [1, 2]
    finally:
        set_(before)


@pytest.mark.skipif(not _uses_openblas(), reason="numpy is not built with OpenBLAS here")
def test_emulator_runs_kernels_on_one_blas_thread(monkeypatch) -> None:
    import tegula

    get, set_ = blas.controls()
    before = get()
    set_(2)
    try:
        k = tegula.compile(_gemm, target="cuda-emu")
        from tegula.backends.emu import compile_func

        ck = compile_func(k.artifact.lowered).kernels[0]
        seen = _spy(ck, monkeypatch)
        a, b, c = _inputs()
        k(a, b, c)
        assert seen == [1] and get() == 2
        np.testing.assert_allclose(c, _ref(a, b), rtol=1e-5, atol=1e-4)
    finally:
        set_(before)


def test_blas_threads_setting() -> None:
    assert config.from_env({}).blas_threads == 1
    assert config.from_env({"TEGULA_BLAS_THREADS": " 4 "}).blas_threads == 4
    assert config.from_env({"TEGULA_BLAS_THREADS": "0"}).blas_threads == 0
    with pytest.raises(ConfigError, match="TEGULA_BLAS_THREADS must be a whole number, got 'two'"):
        config.from_env({"TEGULA_BLAS_THREADS": "two"})


def test_limit_zero_or_above_the_count_changes_nothing() -> None:
    ctl = blas.controls()
    if not ctl:
        with blas.limited(1):
            pass
        return
    get, _ = ctl
    before = get()
    with blas.limited(0):
        assert get() == before
    with blas.limited(before + 8):
        assert get() == before
