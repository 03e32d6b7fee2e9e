"""Two details of the PTX ISA that the Hopper emulator models: wgmma's ``scale_d`` operand (0:
``D = A * B``, the accumulator overwritten; 1: ``D = A * B + D``), and TMA loads reading global
memory until they complete (a global store made after the load is issued and before it lands is
a race, reported; as a warning, what lands is the stored value)."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

import tegula
import tegula.language as T
from tegula.backends.emu import RaceWarning, execute
from tegula.errors import RaceError
from tegula.ir import expr as E
from tegula.ir import stmt as S
from tegula.ir.visitor import Mutator
from tegula.passconfig import PassConfigKey

from emu_util import random_args
from hopper_util import lowered

WGMMA = ("tl::wgmma_ss", "tl::wgmma_rs", "tl::wgmma_ss_fp8")


def with_scale_d(low, scale: int):
    """``low`` with every wgmma given ``scale_d = scale`` (the lowering leaves it out: 1)."""
    seen = []

    class M(Mutator):
        def visit_Evaluate(self, s):
            v = s.value
            if isinstance(v, E.Builtin) and v.name in WGMMA:
                seen.append(v)
                assert len(v.args) == 3
                return S.Evaluate(dataclasses.replace(v, args=v.args + (E.const(scale),)), span=s.span)
            return s

    out = M().visit(low)
    assert seen
    return out


@pytest.mark.parametrize("scale", [0, 1])
def test_wgmma_scale_d_accumulates_or_overwrites(rng, scale):
    f, low = lowered("gemm_tma")  # 256 x 128 x 192, k-tiles of 32: 12 wgmma k-steps of 16
    args = random_args(f, rng)
    a, b = (x.astype(np.float64) for x in args[:2])
    execute(with_scale_d(low, scale), args)
    # scale_d = 0 on every wgmma: each k-step overwrites, what is left is the last one's product
    want = a @ b if scale else a[:, -16:] @ b[-16:, :]
    np.testing.assert_allclose(args[2].astype(np.float64), want, rtol=2e-2, atol=5e-2)


def tma_then_store():
    @T.prim_func
    def k(X: T.Tensor((64, 64), "float16"), Y: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            bars = T.alloc_barrier([128])
            S_ = T.alloc_shared((64, 64), "float16")
            T.tma_copy(X[0:64, 0:64], S_, barrier=bars[0])
            for j in T.serial(32):      # issued, not landed: a race with the copy
                X[tx // 2, (tx % 2) * 32 + j] = X[tx // 2, (tx % 2) * 32 + j] * 2.0
            T.mbarrier_arrive(bars[0])
            T.mbarrier_wait_parity(bars[0], 0)
            for j in T.serial(32):
                Y[tx // 2, (tx % 2) * 32 + j] = S_[tx // 2, (tx % 2) * 32 + j]

    return k


def test_a_global_store_while_a_tma_load_reads_it_is_a_race(rng):
    x = rng.standard_normal((64, 64)).astype(np.float16)
    k = tegula.compile(tma_then_store(), target="cuda-emu:sm_90a")
    assert "tl::tma_load" in k.get_kernel_source()
    with pytest.raises(RaceError, match=r"data race on global buffer 'X' element 0: thread 0 writes it while "
                       r"the TMA load on mbarrier 'bars\[0\]' issued by thread 0 \(phase 0\) still reads it") as e:
        k(x, np.zeros((64, 64), np.float16))
    msg = str(e.value)
    lines = Path(__file__).read_text().splitlines()
    store = next(i + 1 for i, t in enumerate(lines) if "* 32 + j] * 2.0" in t)
    load = next(i + 1 for i, t in enumerate(lines) if "T.tma_copy(X[0:64, 0:64], S_" in t)
    assert f"test_emu_hopper_async.py:{store}  X[tx // 2, (tx % 2) * 32 + j] = X[" in msg
    assert f"test_emu_hopper_async.py:{load}  T.tma_copy(X[0:64, 0:64], S_" in msg
    assert e.value.span.line == store and "tegula/backends/" not in msg
    assert "T.mbarrier_wait_parity" in msg


def tma_then_write(mode):
    @T.prim_func
    def k(X: T.Tensor((64, 64), "float32"), Y: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128):
            tx = T.get_thread_binding()
            bars = T.alloc_barrier([128])
            S_ = T.alloc_shared((64, 64), "float32")
            S2 = T.alloc_shared((64, 64), "float32")
            T.copy(Y, S2)
            T.tma_copy(X[0:64, 0:64], S_, barrier=bars[0])
            if mode == "copy":
                T.copy(S2, X)  # a TMA store, or vector stores: write
            elif mode == "atomic":
                T.atomic_add(X[tx // 2, 3], 1.0)  # write
            else:
                for i, j in T.Parallel(64, 64):
                    X[i, j] = S2[i, j] + 1.0  # write
            T.mbarrier_arrive(bars[0])
            T.mbarrier_wait_parity(bars[0], 0)
            T.copy(S_, Y)
    return k


@pytest.mark.parametrize("mode,tma_store", [("copy", True), ("copy", False), ("atomic", None), ("parallel", None)])
def test_every_kind_of_global_write_races_with_a_tma_load_in_flight(rng, mode, tma_store):
    cfg = {} if tma_store is None else {PassConfigKey.TEGULA_TMA_STORE: tma_store}
    k = tegula.compile(tma_then_write(mode), target="cuda-emu:sm_90a", pass_configs=cfg)
    if tma_store is not None:
        assert ("tl::tma_store" in k.get_kernel_source()) == tma_store
    x, y = (rng.standard_normal((64, 64)).astype(np.float32) for _ in range(2))
    with pytest.raises(RaceError, match=r"data race on global buffer 'X' element \d+: thread \d+ writes it while "
                       r"the TMA load on mbarrier 'bars\[0\]'") as e:
        k(x, y)
    lines = Path(__file__).read_text().splitlines()
    want = {"copy": "T.copy(S2, X)", "atomic": "T.atomic_add(X[tx // 2, 3], 1.0)", "parallel": "X[i, j] = S2[i, j]"}[mode]
    at = next(i + 1 for i, t in enumerate(lines) if want in t and t.rstrip().endswith("write"))
    assert e.value.span.line == at and f"test_emu_hopper_async.py:{at}  {want}" in str(e.value)


def test_a_tma_load_reads_global_memory_when_it_lands(rng):
    x = rng.standard_normal((64, 64)).astype(np.float16)
    y = np.full((64, 64), np.nan, np.float16)
    k = tegula.compile(tma_then_store(), target="cuda-emu:sm_90a",
                       pass_configs={PassConfigKey.TEGULA_EMU_RACES_AS_WARNINGS: True})
    x0 = x.copy()
    with pytest.warns(RaceWarning, match="data race on global buffer 'X'"):
        k(x, y)
    np.testing.assert_array_equal(x, x0 * np.float16(2))
    np.testing.assert_array_equal(y, x)  # the doubled values, not those at issue
