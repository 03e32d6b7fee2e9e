"""SpecializeMasks: same results on the interpreter, and a mask-free copy of masked loops."""
import importlib
import sys
from pathlib import Path

import numpy as np

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
