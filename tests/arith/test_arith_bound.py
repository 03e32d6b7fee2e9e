import pytest

from tegula.arith.bound import bound
from tegula.ir import expr as E
from tegula.ir.buffer import Buffer
from tegula.ir.expr import BinOp, Var, const

i, j, n = Var("i"), Var("j"), Var("n")
R = {i: (0, 127), j: (-4, 3), n: (1, 8)}


@pytest.mark.parametrize("build, expected", [
    (lambda: const(5), (5, 5)),
    (lambda: i, (0, 127)),
    (lambda: i * 4 + j, (-4, 511)),
    (lambda: i - j, (-3, 131)),
    (lambda: j * j, (-12, 16)),  # interval products do not know it is a square
    (lambda: -j, (-3, 4)),
    (lambda: i // 32, (0, 3)),
    (lambda: j // 2, (-2, 1)),
    (lambda: i // n, (0, 127)),
    (lambda: i % 32, (0, 31)),
    (lambda: (i % 32 + 64) % 64, (0, 31)),  # [64, 95] lies in one period
    (lambda: (j + 4) % 16, (0, 7)),
    (lambda: Var("free") % 8, (0, 7)),
    (lambda: i % n, (0, 7)),
    (lambda: E.minimum(i, j), (-4, 3)),
    (lambda: E.maximum(i, j), (0, 127)),
    (lambda: E.select(i < 3, j, n), (-4, 8)),
    (lambda: BinOp("shl", n, const(2)), (4, 32)),
    (lambda: BinOp("shr", i, const(4)), (0, 7)),
    (lambda: BinOp("bitand", i, const(15)), (0, 15)),
    (lambda: i < j, (0, 1)),
    (lambda: E.cast("int64", i), (0, 127)),
])
def test_bounds(build, expected):
    assert bound(build(), R) == expected


@pytest.mark.parametrize("build", [
    lambda: Var("free"),
    lambda: i + Var("free"),
    lambda: i // j,  # divisor range contains zero
    lambda: Buffer("A", (4,), "int32")[0],
    lambda: E.cast("float32", i),
    lambda: E.cast("int8", i * 4),  # does not fit
])
def test_unknown_bounds(build):
    assert bound(build(), R) is None


def test_python_ints_and_no_ranges():
    assert bound(7) == (7, 7)
    assert bound(const(3) + 4) == (7, 7)
    assert bound(i) is None
