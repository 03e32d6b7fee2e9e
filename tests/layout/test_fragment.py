"""Fragment layouts: every element is held, by the right number of threads, at distinct registers."""
import itertools

import pytest

from tegula.ir import expr as E
from tegula.layout.fragment import (FlatLayout, MmaLayout, Replicated, RowLayout, RowsOf, flatten,
                                    mma_warps, unflatten)
from tegula.layout.shared import RowMajor, Swizzled


def ev(e):
    return e.value if isinstance(e, E.Const) else e


def holders(lay):
    """{coords: [(thread, register)]} by evaluating coords for every thread and register."""
    t = E.Var("t")
    out = {}
    from tegula.ir.visitor import substitute
    from tegula.arith.simplify import simplify

    for k in range(lay.local_size):
        exprs = lay.coords(t, k)
        for th in range(lay.threads):
            c = tuple(int(simplify(substitute(x, {t: E.const(th)})).value) for x in exprs)
            out.setdefault(c, []).append((th, k))
    return out


@pytest.mark.parametrize("lay,replicas", [
    (MmaLayout(32, 16, 2, 1), 1), (MmaLayout(64, 32, 2, 2), 1), (MmaLayout(16, 64, 1, 4), 1),
    (RowLayout(8, 64, 128, 16, 4), 1), (RowLayout(2, 64, 64, 32, 2), 1), (RowLayout(1, 1024, 128, 128, 8), 1),
    (FlatLayout((4, 8, 16), 64, 2), 1), (Replicated((3, 5), 32), 32),
])
def test_layout_covers_every_element(lay, replicas):
    h = holders(lay)
    want = set(itertools.product(*[range(d) for d in lay.shape]))
    assert set(h) == want
    assert all(len(v) == replicas for v in h.values())
    # a thread never holds the same element in two registers
    for v in h.values():
        assert len({th for th, _ in v}) == len(v)


@pytest.mark.parametrize("parent", [MmaLayout(64, 32, 2, 2), MmaLayout(32, 16, 2, 1), RowLayout(8, 64, 128, 16, 4)])
def test_rows_of_matches_parent_rows(parent):
    rows = RowsOf(parent)
    t = E.Var("t")
    from tegula.ir.visitor import substitute
    from tegula.arith.simplify import simplify

    def val(e, th):
        return int(simplify(substitute(e, {t: E.const(th)})).value)

    for th in range(parent.threads):
        for k in range(parent.local_size):
            r = parent.row_local(k)
            assert val(parent.coords(t, k)[0], th) == val(rows.coords(t, r)[0], th)
    h = holders(rows)
    assert set(h) == {(i,) for i in range(parent.shape[0])}


def test_mma_warps_policies():
    assert mma_warps(128, 128, 4, "Square") == (2, 2)
    assert mma_warps(128, 128, 4, "FullRow") == (4, 1)
    assert mma_warps(128, 128, 4, "FullCol") == (1, 4)
    assert mma_warps(64, 256, 4, "Square") == (1, 4)
    assert mma_warps(8, 8, 4, "Square") is None


@pytest.mark.parametrize("shape,elt", [((64, 32), 2), ((32, 64), 2), ((16, 128), 2), ((3, 32, 64), 2), ((64, 64), 1)])
def test_swizzle_is_a_permutation_of_whole_chunks(shape, elt):
    lay = Swizzled(shape, elt)
    assert Swizzled.suits(shape, elt)
    idx = list(itertools.product(*[range(d) for d in shape]))
    offs = [int(lay.offset([E.const(i) for i in x]).value) for x in idx]
    assert sorted(offs) == list(range(len(idx)))
    chunk = 16 // elt
    for x, o in zip(idx, offs):  # elements of one 16-byte chunk stay together, in order
        assert o % chunk == x[-1] % chunk
    # eight consecutive rows reading the same logical chunk hit eight different 16-byte bank groups
    rows, cols = shape[-2], shape[-1]
    if cols * elt >= 64:
        for c in range(0, cols, chunk):
            groups = {(int(lay.offset([E.const(0)] * (len(shape) - 2) + [E.const(r), E.const(c)]).value) * elt // 16) % 8
                      for r in range(8)}
            assert len(groups) == 8


def test_row_major_and_flatten_roundtrip():
    dims = (3, 4, 5)
    lay = RowMajor(dims)
    for f in range(60):
        c = [int(x.value) for x in unflatten(E.const(f), dims)]
        assert int(lay.offset([E.const(x) for x in c]).value) == f
        assert int(flatten([E.const(x) for x in c], dims).value) == f
