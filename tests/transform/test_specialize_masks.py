"""SpecializeMasks: same results on the interpreter, and a mask-free copy of masked loops."""
import importlib
import sys
from pathlib import Path

import numpy as np
import pytest

import tegula
from tegula.arith.simplify import simplify_stmt
from tegula.ir import expr as E
from tegula.transform.specialize_masks import specialize_masks, uniform_condition

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def fa():
    sys.path.insert(0, str(EXAMPLES))
    try:
        return importlib.import_module("flash_attention")
    finally:
        sys.path.pop(0)


def test_uniform_condition_of_a_causal_mask():
    i, j, k0, q0 = (E.Var(n) for n in ("i", "j", "k0", "q0"))
    cond = E.binary("and", E.compare("lt", k0 + j, 300), E.compare("le", k0 + j, q0 + i))
    u = uniform_condition(cond, {i: (0, 127), j: (0, 63)})
    # every (i, j) keeps exactly when the worst corner (i = 0, j = 63) does
    for kv, qv, want in ((0, 64, True), (0, 62, False), (240, 400, False), (192, 320, True)):
        got = simplify_stmt(E.select(u, E.const(1), E.const(0)))
        val = tegula.ir.visitor.substitute(got, {k0: E.const(kv), q0: E.const(qv)})
        from tegula.arith.simplify import simplify

        assert int(simplify(val).value) == int(want), (kv, qv)
    # not affine in the loop variables: no condition
    assert uniform_condition(E.compare("lt", i * k0, 5), {i: (0, 7)}) is None


def test_specialized_attention_is_the_same_function(rng):
    ex = fa()
    prim = ex.flash_attention(1, 2, 200, 64, True, 1, 64, 64)
    spec = specialize_masks(simplify_stmt(prim))
    assert spec.script().count("T.if_then_else(keep") == 1  # only the fallback copy masks
    q, k, v = (rng.standard_normal((1, 2, 200, 64)).astype(np.float16) for _ in range(3))
    a = tegula.compile(prim, out_idx=[-1], target="cpu")(q, k, v)
    b = tegula.compile(spec, out_idx=[-1], target="cpu")(q, k, v)
    np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(b.astype(np.float64), ex.reference(q, k, v, True), atol=5e-3)


def _windowed(M=64, N=32, window=None):
    import tegula.language as T

    @T.prim_func
    def windowed(A: T.Tensor((2 * M, 2 * N), "float32"), B: T.Tensor((2 * M, 2 * N), "float32")):
        with T.Kernel(2, threads=128) as bx:
            acc = T.alloc_fragment((M, N), "float32")
            for k in T.Pipelined(0, 2, num_stages=1):
                for i, j in T.Parallel(M, N):
                    q_idx = bx * M + i
                    k_idx = k * N + j
                    if window is not None:
                        acc[i, j] = T.if_then_else(q_idx >= k_idx and q_idx < k_idx + window,
                                                   A[bx * M + i, k * N + j], -1.0)
                    else:
                        acc[i, j] = T.if_then_else(q_idx >= k_idx, A[bx * M + i, k * N + j], -1.0)
                T.copy(acc, B[bx * M, k * N])
    return windowed


@pytest.mark.parametrize("window", [None, 40])
@pytest.mark.parametrize("target", ["cpu", "cuda-emu"])
def test_mask_on_integer_lets(rng, target, window):
    """Conditions on integer lets (``q_idx = bx * M + i``) are conditions on their values: the
    fast copy's guard names no variable of the loop body."""
    prim = _windowed(window=window)
    spec = specialize_masks(simplify_stmt(prim))
    guard = spec.script().split("if ", 1)[1].split(":", 1)[0]
    assert "q_idx" not in guard and "k_idx" not in guard, guard
    a = rng.standard_normal((128, 64)).astype(np.float32)
    b = tegula.compile(prim, out_idx=[-1], target=target)(a)
    q, kk = np.meshgrid(np.arange(128), np.arange(64), indexing="ij")
    keep = (q >= kk) & ((q < kk + window) if window is not None else True)
    np.testing.assert_array_equal(b, np.where(keep, a.astype(np.float64), -1.0))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_mask_on_integer_lets_compiles(arch):
    src = tegula.compile(_windowed(window=40), out_idx=[-1], target=f"cuda:{arch}").get_kernel_source()
    assert "__global__" in src and "q_idx" not in src.split("if (", 1)[1].split(")", 1)[0]
