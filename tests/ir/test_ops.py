"""The operator table (tegula/ir/ops.py): folding, the interpreter and numpy agree.

Folding happens at construction (``E.binary`` and friends), in ``arith.simplify`` and on the host
(grid and shape expressions); the interpreter evaluates the same rows on numpy values. The
reference here is written with numpy (and exact Python arithmetic where numpy has no operator),
independently of the table.
"""
from __future__ import annotations

import math
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

pytest.importorskip("hypothesis", reason="needs hypothesis (pip install -e '.[test]')")

from hypothesis import HealthCheck, assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import tegula.language as T
from tegula.arith.simplify import simplify
from tegula.backends.closure import compile_expr
from tegula.backends.interp.context import Ctx
from tegula.errors import DTypeError
from tegula.ir import dtype as dt
from tegula.ir import expr as E
from tegula.ir import ops
from tegula.ir.evaluate import evaluate

DTYPES = [dt.int8, dt.int16, dt.int32, dt.int64, dt.uint8, dt.bool_, dt.float16, dt.bfloat16,
          dt.float32, dt.float64]


# -- the two folding bugs ------------------------------------------------------------------------

def test_int32_overflow_folds_to_the_wrapped_value():
    e = T.int32(2**31 - 1) + 1
    assert isinstance(e, E.Const) and e.dtype == dt.int32 and e.value == -(2**31)
    assert (T.int32(-(2**31)) - 1).value == 2**31 - 1
    assert (T.int32(2**16) * T.int32(2**16)).value == 0
    assert (T.uint8(250) + T.uint8(10)).value == 4
    assert (-T.int8(-128)).value == -128
    # the simplifier folds the same way
    assert simplify(E.BinOp("add", E.const(2**31 - 1), E.const(1))).value == -(2**31)


def test_int64_truncdiv_is_exact():
    big = T.int64(2**62 + 1)
    assert T.truncdiv(big, 1).value == 2**62 + 1
    assert T.truncdiv(-big, 3).value == -((2**62 + 1) // 3)
    assert T.truncmod(-big, 3).value == -((2**62 + 1) % 3)
    assert (big // 1).value == 2**62 + 1
    assert (big / 1).value == 2**62 + 1  # integer div truncates
    n = E.Var("n", dt.int64)
    assert evaluate(E.binary("truncdiv", n, 1), {n: 2**62 + 1}) == 2**62 + 1
    assert simplify(E.BinOp("truncdiv", E.const(2**62 + 1, "int64"), E.const(1, "int64"))).value == 2**62 + 1


def test_float_floordiv_is_floor_of_the_quotient():
    # as CUDA computes it (floorf(a / b)), not Python's fmod-based float //
    assert (T.float32(1.0) // T.float32(0.1)).value == 10.0
    assert (T.float32(1.0) % T.float32(0.1)).value == float(np.float32(1) - np.float32(10) * np.float32(0.1))
    assert _interpret(ops.BINARY["floordiv"], dt.float32, [1.0, 0.1], 0) == 10.0


def test_constants_hold_values_of_their_dtype():
    assert E.Const(2**32 + 5, dt.int32).value == 5
    assert E.Const(-1, dt.uint16).value == 65535
    assert E.const(0.1, "float32").value == float(np.float32(0.1))
    assert str(E.const(0.1, "float32")) == "0.1"
    assert str(E.const(0.1, "bfloat16")) == "T.bfloat16(0.1)"


def test_operand_dtypes_are_checked():
    x = E.Var("x", dt.float32)
    with pytest.raises(DTypeError, match="needs integers"):
        x << 1
    with pytest.raises(DTypeError, match="needs integers"):
        ~x
    with pytest.raises(DTypeError, match="needs numbers"):
        E.Var("p", dt.bool_) + E.Var("q", dt.bool_)


def test_index_arrays_evaluate_in_their_dtype_or_wide():
    """``array_fn``: index arithmetic over numpy arrays (the barrier pass's proofs keep dtypes and
    wrap as the device does; layout plots compute in int64), and a node it cannot compute raises."""
    from tegula.ir.evaluate import HostEvalError, array_fn

    m = E.Var("m", dt.int32)
    read = lambda v: lambda env: env[v]  # noqa: E731
    xs = np.array([1, 2**30, 7], np.int32)
    e = T.min(m * 2, T.int32(100)) + T.truncdiv(m, -2)
    got = array_fn(e, read)({m: xs})
    # 2**30: m * 2 wraps to -2**31, and -2**31 - 2**29 wraps again
    assert got.dtype == np.int32 and got.tolist() == [2 + 0, 2**32 - 2**31 - 2**29, 14 - 3]
    wide = array_fn(m * 2 + T.Cast("int16", m), read, wide=True)({m: xs})
    assert wide.dtype == np.int64 and wide.tolist() == [3, 3 * 2**30, 21]
    assert array_fn(T.if_then_else(m > 3, m, 3), read)({m: xs}).tolist() == [3, 2**30, 7]
    with pytest.raises(HostEvalError):
        array_fn(T.Cast("float32", m) * 2.0, read)


def test_host_evaluation_wraps_like_the_device():
    m = E.Var("m", dt.int32)
    assert evaluate(m * 2, {m: 2**30}) == -(2**31)
    assert evaluate(T.truncdiv(m, -2), {m: 7}) == -3
    assert evaluate(m // -2, {m: 7}) == -4
    assert evaluate(T.if_then_else(m > 3, m, 3), {m: 5}) == 5


def test_every_row_is_printable_and_has_a_c_spelling():
    for row in (*ops.BINARY.values(), *ops.COMPARE.values(), *ops.UNARY.values()):
        assert row.py and isinstance(row.c, str) and row.c
    for row in ops.INTRINSICS.values():
        assert row.py == f"T.{row.name}" and len(row.c) == 3 and "{}" in row.c[0]


# -- the property: fold == interpreter == numpy -------------------------------------------------

def _reference(op: str, d: dt.DType, vals: list) -> object:
    """numpy (and exact Python) semantics of ``op`` on ``vals`` of dtype ``d``, written apart
    from the table."""
    if not d.is_float:
        a = [np.array(v, dtype=d.np) for v in vals]
        exact_int = {
            "div": lambda x, y: math.trunc(Fraction(x, y)),
            "truncdiv": lambda x, y: math.trunc(Fraction(x, y)),
            "truncmod": lambda x, y: x - y * math.trunc(Fraction(x, y)),
            "fmod": lambda x, y: x - y * math.trunc(Fraction(x, y)),
            "abs": abs,
        }
        if op in exact_int:  # wrapped by numpy's own cast through uint64
            r = exact_int[op](*(int(v) for v in vals))
            return np.array(r % 2**64, dtype=np.uint64).astype(d.np)[()]
        ref = {
            "add": np.add, "sub": np.subtract, "mul": np.multiply, "floordiv": np.floor_divide,
            "floormod": np.remainder, "min": np.minimum, "max": np.maximum,
            "and": np.logical_and, "or": np.logical_or, "bitand": np.bitwise_and,
            "bitor": np.bitwise_or, "bitxor": np.bitwise_xor, "shl": np.left_shift,
            "shr": np.right_shift, "lt": np.less, "le": np.less_equal, "gt": np.greater,
            "ge": np.greater_equal, "eq": np.equal, "ne": np.not_equal, "neg": np.negative,
            "bitnot": np.invert, "not": np.logical_not, "pow": np.power,
            "floor": lambda x: x, "ceil": lambda x: x, "round": lambda x: x, "trunc": lambda x: x,
            "isnan": lambda x: np.zeros_like(x, bool), "isinf": lambda x: np.zeros_like(x, bool),
        }[op]
        with np.errstate(all="ignore"):
            return np.asarray(ref(*a))[()]
    a = [np.array(v, dtype=d.np) for v in vals]
    if op in ops.COMPARE or op in ("min", "max", "neg", "isnan", "isinf", "abs"):
        c = a  # exact in the storage type
    else:
        c = [x.astype(np.float32) if d.bits < 32 else x for x in a]
    one = c[0].dtype.type(1)
    ref = {
        "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide,
        "floordiv": lambda x, y: np.floor(x / y), "floormod": lambda x, y: x - np.floor(x / y) * y,
        "min": np.minimum, "max": np.maximum, "lt": np.less, "le": np.less_equal,
        "gt": np.greater, "ge": np.greater_equal, "eq": np.equal, "ne": np.not_equal,
        "neg": np.negative, "exp": np.exp, "exp2": np.exp2, "exp10": lambda x: np.power(c[0].dtype.type(10), x),
        "log": np.log, "log2": np.log2, "log10": np.log10, "log1p": np.log1p, "expm1": np.expm1,
        "sqrt": np.sqrt, "rsqrt": lambda x: one / np.sqrt(x), "abs": np.abs, "tanh": np.tanh,
        "sigmoid": lambda x: one / (one + np.exp(-x)), "floor": np.floor, "ceil": np.ceil,
        "round": np.rint, "trunc": np.trunc, "sin": np.sin, "cos": np.cos, "tan": np.tan,
        "erf": lambda x: np.array(math.erf(float(x))).astype(x.dtype), "pow": np.power,
        "fmod": np.fmod, "isnan": np.isnan, "isinf": np.isinf,
        "acos": np.arccos, "acosh": np.arccosh, "asin": np.arcsin, "asinh": np.arcsinh,
        "atan": np.arctan, "atanh": np.arctanh, "sinh": np.sinh, "cosh": np.cosh, "nearbyint": np.rint,
        "atan2": np.arctan2, "hypot": np.hypot, "copysign": np.copysign, "nextafter": np.nextafter,
        "__exp": np.exp, "__exp10": lambda x: np.power(c[0].dtype.type(10), x), "__log": np.log,
        "__log2": np.log2, "__log10": np.log10, "__sin": np.sin, "__cos": np.cos, "__tan": np.tan,
        "fast_rcp": lambda x: one / x,
    }[op]
    with np.errstate(all="ignore"):
        r = np.asarray(ref(*c))
    return (r if r.dtype == bool else r.astype(d.np))[()]


_CASES = [(row, d) for row in (*ops.BINARY.values(), *ops.COMPARE.values(), *ops.UNARY.values())
          for d in DTYPES if row.accepts(d)]
_CASES += [(row, d) for row in ops.INTRINSICS.values() for d in DTYPES
           if (d.is_float or (not row.float_only and d.is_int))]


def _value(d: dt.DType) -> st.SearchStrategy:
    if d.is_bool:
        return st.booleans()
    if d.is_int:
        info = np.iinfo(d.np)
        return st.integers(int(info.min), int(info.max))
    width = {16: 16, 32: 32, 64: 64}[d.bits] if d.name != "bfloat16" else 32
    return st.floats(width=width).map(lambda v: float(np.array(v).astype(d.np)))


@st.composite
def _case(draw: st.DrawFn) -> tuple:
    row, d = draw(st.sampled_from(_CASES))
    vals = [draw(_value(d)) for _ in range(row.arity)]
    if d.is_int and row.name in ("shl", "shr"):
        vals[1] = draw(st.integers(0, d.bits - 1))
    if d.is_int and row.name == "pow":
        vals[1] = draw(st.integers(0, 16))
    return row, d, vals


def _node(row: ops.Op, args: list) -> E.Expr:
    if row.kind == "binary":
        return E.BinOp(row.name, *args)
    if row.kind == "compare":
        return E.Compare(row.name, *args)
    if row.kind == "unary":
        return E.UnaryOp(row.name, *args)
    return E.Call(row.name, tuple(args))


def _interpret(row: ops.Op, d: dt.DType, vals: list, lanes: int) -> object:
    """The interpreter's closure for the node on variables, run on scalars or on lane arrays."""
    vs = [E.Var(f"v{k}", d) for k in range(len(vals))]
    ctx = Ctx()
    slots = [ctx.slot(v) for v in vs]
    if lanes:
        ctx.vec_vars.update(id(v) for v in vs)
    fn = compile_expr(_node(row, vs), ctx).fn
    env: list = [None] * ctx.slots.size
    for s, v in zip(slots, vals):
        env[s] = np.full(lanes, v, dtype=d.np) if lanes else np.array(v).astype(d.np)[()]
    with np.errstate(all="ignore"):
        out = fn(env)
    return out[0] if lanes else out


def _same(x: object, y: object, d: dt.DType) -> bool:
    x, y = np.asarray(x), np.asarray(y)
    if x.dtype != y.dtype:
        return False
    if x.dtype.kind == "f" or x.dtype in (np.dtype(ml_dtypes.bfloat16),):
        xf, yf = x.astype(np.float64), y.astype(np.float64)
        return bool((np.isnan(xf) and np.isnan(yf)) or xf == yf)
    return bool(x == y)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_case())
def test_fold_interpreter_and_numpy_agree(case):
    row, d, vals = case
    if d.is_int and row.name in ("div", "floordiv", "floormod", "truncdiv", "truncmod", "fmod"):
        assume(vals[1] != 0)
    consts = [E.const(v, d) for v in vals]
    folded = ops.fold(row, d, *vals)
    assert folded is not None
    out_d = row.result_dtype(d)
    want = _reference(row.name, d, vals)
    assert _same(np.array(folded).astype(out_d.np), want, d), (row.name, d, vals, folded, want)
    # construction-time folding and the simplifier give the same constant
    built = E.call(row.name, *consts) if row.kind == "intrinsic" else _node(row, consts)
    for c in (simplify(built), E.Const(folded, out_d)):
        assert isinstance(c, E.Const) and c.dtype == out_d
        assert _same(np.array(c.value).astype(out_d.np), want, d)
    # the interpreter, on scalars and on lanes
    for lanes in (0, 3):
        got = _interpret(row, d, vals, lanes)
        assert _same(got, want, d), (row.name, d, vals, got, want, lanes)


CAST_DTYPES = [dt.int8, dt.int16, dt.int32, dt.int64, dt.uint8, dt.uint32, dt.bool_, dt.float16,
               dt.bfloat16, dt.float32, dt.float64]


def _cast_reference(v: object, frm: dt.DType, to: dt.DType) -> object:
    """PTX cvt.rzi for float -> int (saturate, NaN -> 0); numpy's astype otherwise."""
    x = np.array(v).astype(frm.np)
    if frm.is_float and to.is_int:
        f = float(x)
        info = np.iinfo(to.np)
        if math.isnan(f):
            return to.np.type(0)
        if f >= float(info.max):
            return to.np.type(info.max)
        if f <= float(info.min):
            return to.np.type(info.min)
        return to.np.type(math.trunc(f))
    with np.errstate(all="ignore"):
        return x.astype(to.np)[()]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(CAST_DTYPES), st.sampled_from(CAST_DTYPES), st.data())
def test_casts_agree(frm, to, data):
    assume(frm != to)
    v = data.draw(_value(frm))
    want = _cast_reference(v, frm, to)
    folded = E.cast(to, E.const(v, frm))
    assert isinstance(folded, E.Const) and _same(np.array(folded.value).astype(to.np), want, to)
    var = E.Var("v", frm)
    ctx = Ctx()
    s = ctx.slot(var)
    fn = compile_expr(E.Cast(to, var), ctx).fn
    env: list = [None] * ctx.slots.size
    env[s] = np.array(v).astype(frm.np)[()]
    assert _same(fn(env), want, to)
    ctx.vec_vars.add(id(var))
    fn = compile_expr(E.Cast(to, var), ctx).fn
    env[s] = np.full(2, v, dtype=frm.np)
    assert _same(fn(env)[1], want, to)


# -- one-byte floats widen through a table of their 256 codes ---------------------------------

@pytest.mark.parametrize("frm", ["float8_e4m3fn", "float8_e5m2", "float4_e2m1fn"])
@pytest.mark.parametrize("to", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16, np.bool_])
def test_widen_is_astype_bit_for_bit(frm, to):
    d = np.dtype(getattr(ml_dtypes, frm))
    codes = np.arange(256, dtype=np.uint8).view(d)  # every code, NaNs and infinities included
    rng = np.random.default_rng()
    tile = rng.integers(0, 256, (48, 40), dtype=np.uint8).view(d)[::3, 1::2]  # strided view
    for x in (codes, tile):
        got, want = ops.widen(x, to), x.astype(to)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    s = codes[7]  # a numpy scalar takes astype's own path
    assert ops.widen(s, to) == s.astype(to)


def test_widen_float16_tiles_is_astype_bit_for_bit():
    codes = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)  # NaNs too
    rng = np.random.default_rng()
    tile = rng.integers(0, 1 << 16, (96, 80), dtype=np.uint16).view(np.float16)[::3, 1::2]
    for x in (codes, tile, codes[:1], tile.T, np.concatenate([codes, codes])):  # last two: astype's
        got, want = ops.widen(x, np.float32), x.astype(np.float32)
        assert got.dtype == want.dtype and got.shape == want.shape and got.strides == want.strides
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    assert ops.widen(codes[:0], np.float32).shape == (0,)


def test_widen_without_copy_returns_the_array():
    x = np.ones((4, 4), np.float32)
    assert ops.widen(x, np.float32, copy=False) is x
    assert ops.widen(x, np.float32) is not x
