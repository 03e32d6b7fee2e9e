"""Two details of the PTX ISA that the Hopper emulator models: wgmma's ``scale_d`` operand (0:
``D = A * B``, the accumulator overwritten; 1: ``D = A * B + D``), and TMA loads reading global
memory until they complete (a global store made after the load is issued and before it lands is
what lands)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import tegula
import tegula.language as T
from tegula.backends.emu import execute
from tegula.ir import expr as E
from tegula.ir import stmt as S
from tegula.ir.visitor import Mutator

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
            for j in T.serial(32):      # issued, not landed: these stores reach the copy
                X[tx // 2, (tx % 2) * 32 + j] = X[tx // 2, (tx % 2) * 32 + j] * 2.0
            T.mbarrier_arrive(bars[0])
            T.mbarrier_wait_parity(bars[0], 0)
            for j in T.serial(32):
                Y[tx // 2, (tx % 2) * 32 + j] = S_[tx // 2, (tx % 2) * 32 + j]

    return k


def test_a_tma_load_reads_global_memory_when_it_lands(rng):
    x = rng.standard_normal((64, 64)).astype(np.float16)
    y = np.full((64, 64), np.nan, np.float16)
    k = tegula.compile(tma_then_store(), target="cuda-emu:sm_90a")
    assert "tl::tma_load" in k.get_kernel_source()
    x0 = x.copy()
    k(x, y)
    np.testing.assert_array_equal(x, x0 * np.float16(2))
    np.testing.assert_array_equal(y, x)  # the doubled values, not those at issue
