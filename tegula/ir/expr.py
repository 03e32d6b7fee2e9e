"""Expression nodes of the tile-level IR.

Nodes are immutable dataclasses compared by identity (``==`` on two expressions builds a
comparison node, as in a kernel body). Python operators on expressions build new nodes, with
Python numbers adopting the dtype of the expression they meet. Use
:func:`tegula.ir.structural.structural_equal` to compare trees.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Sequence, Union

from tegula.errors import DTypeError, KernelTypeError
from tegula.ir import dtype as dt
from tegula.ir import hooks
from tegula.ir import ops
from tegula.ir.dtype import DType
from tegula.ir.span import Span, current_span

ExprLike = Union["Expr", int, float, bool]


@dataclass(frozen=True, eq=False)
class Node:
    """Base of all IR nodes: carries the source span it was built from."""

    span: Optional[Span] = field(default=None, kw_only=True, repr=False)

    def __post_init__(self) -> None:
        if self.span is None:
            object.__setattr__(self, "span", current_span())

    __hash__ = object.__hash__


@dataclass(frozen=True, eq=False)
class Expr(Node):
    """Base of expressions. ``dtype`` is the element type of the value."""

    def __post_init__(self) -> None:
        super().__post_init__()

    @property
    def dtype(self) -> DType:  # overridden by every concrete node
        raise NotImplementedError

    # -- arithmetic -----------------------------------------------------------------------------
    def __add__(self, o: ExprLike) -> "Expr": return binary("add", self, o)
    def __radd__(self, o: ExprLike) -> "Expr": return binary("add", o, self)
    def __sub__(self, o: ExprLike) -> "Expr": return binary("sub", self, o)
    def __rsub__(self, o: ExprLike) -> "Expr": return binary("sub", o, self)
    def __mul__(self, o: ExprLike) -> "Expr": return binary("mul", self, o)
    def __rmul__(self, o: ExprLike) -> "Expr": return binary("mul", o, self)
    def __truediv__(self, o: ExprLike) -> "Expr": return binary("div", self, o)
    def __rtruediv__(self, o: ExprLike) -> "Expr": return binary("div", o, self)
    def __floordiv__(self, o: ExprLike) -> "Expr": return binary("floordiv", self, o)
    def __rfloordiv__(self, o: ExprLike) -> "Expr": return binary("floordiv", o, self)
    def __mod__(self, o: ExprLike) -> "Expr": return binary("floormod", self, o)
    def __rmod__(self, o: ExprLike) -> "Expr": return binary("floormod", o, self)
    def __pow__(self, o: ExprLike) -> "Expr": return call("pow", self, o)
    def __rpow__(self, o: ExprLike) -> "Expr": return call("pow", o, self)
    def __neg__(self) -> "Expr": return unary("neg", self)
    def __pos__(self) -> "Expr": return self
    def __abs__(self) -> "Expr": return call("abs", self)
    def __invert__(self) -> "Expr": return unary("not" if self.dtype.is_bool else "bitnot", self)
    def __and__(self, o: ExprLike) -> "Expr": return binary("and" if _is_bool(self, o) else "bitand", self, o)
    def __rand__(self, o: ExprLike) -> "Expr": return binary("and" if _is_bool(self, o) else "bitand", o, self)
    def __or__(self, o: ExprLike) -> "Expr": return binary("or" if _is_bool(self, o) else "bitor", self, o)
    def __ror__(self, o: ExprLike) -> "Expr": return binary("or" if _is_bool(self, o) else "bitor", o, self)
    def __xor__(self, o: ExprLike) -> "Expr": return binary("bitxor", self, o)
    def __rxor__(self, o: ExprLike) -> "Expr": return binary("bitxor", o, self)
    def __lshift__(self, o: ExprLike) -> "Expr": return binary("shl", self, o)
    def __rshift__(self, o: ExprLike) -> "Expr": return binary("shr", self, o)
    def __rlshift__(self, o: ExprLike) -> "Expr": return binary("shl", o, self)
    def __rrshift__(self, o: ExprLike) -> "Expr": return binary("shr", o, self)

    # -- comparisons build nodes ----------------------------------------------------------------
    def __lt__(self, o: ExprLike) -> "Expr": return compare("lt", self, o)
    def __le__(self, o: ExprLike) -> "Expr": return compare("le", self, o)
    def __gt__(self, o: ExprLike) -> "Expr": return compare("gt", self, o)
    def __ge__(self, o: ExprLike) -> "Expr": return compare("ge", self, o)
    def __eq__(self, o: object) -> "Expr": return compare("eq", self, o)  # type: ignore[override]
    def __ne__(self, o: object) -> "Expr": return compare("ne", self, o)  # type: ignore[override]

    __hash__ = object.__hash__

    def __bool__(self) -> bool:
        if isinstance(self, Const):
            return bool(self.value)
        raise KernelTypeError(
            f"the value of {self} is only known when the kernel runs, so Python cannot branch on it here",
            hint="inside a kernel use `if` on it directly (not within a Python expression), "
            "`T.if_then_else(c, a, b)`, or combine conditions with `&`, `|` and `~`",
        )

    def __index__(self) -> int:
        if isinstance(self, Const) and self.dtype.is_int:
            return int(self.value)
        raise KernelTypeError(f"{self} is not a compile-time integer")

    def astype(self, dtype: Any) -> "Expr":
        return cast(dtype, self)

    def __str__(self) -> str:
        return hooks.expr_str(self)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self}>"


def _is_bool(a: Any, b: Any) -> bool:
    da = a.dtype if isinstance(a, Expr) else (dt.bool_ if isinstance(a, bool) else None)
    db = b.dtype if isinstance(b, Expr) else (dt.bool_ if isinstance(b, bool) else None)
    return (da is None or da.is_bool) and (db is None or db.is_bool)


@dataclass(frozen=True, eq=False)
class Var(Expr):
    """A variable: loop index, block index, scalar parameter, dynamic dimension or let-binding."""

    name: str
    var_dtype: DType = dt.int32

    @property
    def dtype(self) -> DType:
        return self.var_dtype


@dataclass(frozen=True, eq=False)
class Const(Expr):
    """A constant of a given dtype; ``value`` is a Python int, float or bool."""

    value: Union[int, float, bool]
    const_dtype: DType = dt.int32

    def __post_init__(self) -> None:
        super().__post_init__()
        # the value a register of this dtype holds: ints wrapped, floats rounded
        object.__setattr__(self, "value", ops.wrap(self.value, self.const_dtype))

    @property
    def dtype(self) -> DType:
        return self.const_dtype


# op name -> Python spelling, from the operator table (:mod:`tegula.ir.ops`)
BINARY_OPS = {name: row.py for name, row in ops.BINARY.items()}
COMPARE_OPS = {name: row.py for name, row in ops.COMPARE.items()}
UNARY_OPS = {name: row.py for name, row in ops.UNARY.items()}


@dataclass(frozen=True, eq=False)
class BinOp(Expr):
    """``a op b`` for op in :data:`BINARY_OPS`; both operands have the node's dtype
    (``and``/``or`` are boolean)."""

    op: str
    a: Expr
    b: Expr

    @property
    def dtype(self) -> DType:
        return self.a.dtype


@dataclass(frozen=True, eq=False)
class Compare(Expr):
    """``a op b`` for op in :data:`COMPARE_OPS`; a boolean."""

    op: str
    a: Expr
    b: Expr

    @property
    def dtype(self) -> DType:
        return dt.bool_


@dataclass(frozen=True, eq=False)
class UnaryOp(Expr):
    op: str
    a: Expr

    @property
    def dtype(self) -> DType:
        return self.a.dtype


@dataclass(frozen=True, eq=False)
class Select(Expr):
    """``T.if_then_else(cond, then, else_)``."""

    cond: Expr
    then: Expr
    else_: Expr

    @property
    def dtype(self) -> DType:
        return self.then.dtype


@dataclass(frozen=True, eq=False)
class Cast(Expr):
    to: DType
    value: Expr

    @property
    def dtype(self) -> DType:
        return self.to


# name -> number of arguments; all but isnan/isinf return the dtype of their first argument.
INTRINSICS = {name: row.arity for name, row in ops.INTRINSICS.items()}


@dataclass(frozen=True, eq=False)
class Call(Expr):
    """A math intrinsic from :data:`INTRINSICS`."""

    name: str
    args: tuple[Expr, ...]

    @property
    def dtype(self) -> DType:
        return ops.INTRINSICS[self.name].result_dtype(self.args[0].dtype)


@dataclass(frozen=True, eq=False)
class BufferLoad(Expr):
    """``buffer[indices]``: one element (or, inside ``T.Parallel``, one element per iteration)."""

    buffer: Any  # tegula.ir.buffer.Buffer (kept untyped to avoid an import cycle)
    indices: tuple[Expr, ...]

    @property
    def dtype(self) -> DType:
        return self.buffer.dtype


@dataclass(frozen=True, eq=False)
class Builtin(Expr):
    """A thread-level builtin of a backend, produced by lowering. The frontend makes only
    ``"bitcast"`` (``T.reinterpret``), which every target evaluates.

    ``name`` is one of the names its backend's codegen knows (e.g. ``"thread_idx"``,
    ``"shfl_xor"``, ``"sync_threads"``, ``"address_of"``, ``"mma"``); ``attrs`` holds
    compile-time parameters (shapes, dtypes, layouts) as plain Python values. Void builtins are
    used through :class:`~tegula.ir.stmt.Evaluate` and have dtype ``bool`` by convention.
    """

    name: str
    args: tuple[Expr, ...] = ()
    ret: DType = dt.int32
    attrs: tuple = ()

    @property
    def dtype(self) -> DType:
        return self.ret

    def attr(self, key: str, default: Any = None) -> Any:
        for k, v in self.attrs:
            if k == key:
                return v
        return default


# ---------------------------------------------------------------------------------------------
# Constructors used by the operators above and by the language.
# ---------------------------------------------------------------------------------------------

def const(value: Any, dtype: Any = None, span: Optional[Span] = None) -> Const:
    """A constant; the dtype defaults to bool/int32 (int64 when too large)/float32."""
    if dtype is None:
        if isinstance(value, (bool,)) or type(value).__name__ == "bool_":
            dtype = dt.bool_
        elif isinstance(value, int) or (hasattr(value, "dtype") and str(getattr(value, "dtype", "")).startswith(("int", "uint"))):
            value = int(value)
            dtype = dt.int32 if -(2**31) <= value < 2**31 else dt.int64
        else:
            dtype = dt.float32
    dtype = dt.as_dtype(dtype)
    if dtype.is_bool:
        value = bool(value)
    elif dtype.is_int:
        value = int(value)
    else:
        value = float(value)
    return Const(value, dtype, span=span)


def as_expr(x: Any, like: Optional[DType] = None) -> Expr:
    """Turn ``x`` into an expression; Python numbers take the dtype ``like`` where it fits."""
    if isinstance(x, Expr):
        return x
    if hasattr(x, "as_load"):  # a scalar buffer (T.alloc_var) used as a value
        return x.as_load()
    if isinstance(x, bool):
        return const(x, dt.bool_)
    if isinstance(x, int) or (hasattr(x, "dtype") and hasattr(x, "item") and getattr(x, "ndim", 1) == 0):
        if hasattr(x, "item"):
            x = x.item()
        if isinstance(x, float):
            return const(x, like if like is not None and like.is_float else dt.float32)
        if like is not None and not like.is_bool:
            return const(x, like)
        return const(x)
    if isinstance(x, float):
        if like is not None and like.is_float:
            return const(x, like)
        return const(x, dt.float32)
    raise KernelTypeError(f"expected a number or an expression, got {type(x).__name__} {x!r}")


def _operands(a: Any, b: Any) -> tuple[Expr, Expr]:
    if isinstance(a, Expr) and not isinstance(b, Expr):
        return a, as_expr(b, like=a.dtype)
    if isinstance(b, Expr) and not isinstance(a, Expr):
        return as_expr(a, like=b.dtype), b
    ea, eb = as_expr(a), as_expr(b)
    return ea, eb


def _unify(a: Expr, b: Expr) -> tuple[Expr, Expr, DType]:
    if a.dtype == b.dtype:
        return a, b, a.dtype
    # a Python literal folded into a Const of its own type still adapts to the other side
    t = dt.promote(a.dtype, b.dtype)
    if isinstance(a, Const) and not isinstance(b, Const) and (b.dtype.is_float or a.dtype.is_int):
        t = b.dtype if not (a.dtype.is_float and b.dtype.is_int) else t
    elif isinstance(b, Const) and not isinstance(a, Const) and (a.dtype.is_float or b.dtype.is_int):
        t = a.dtype if not (b.dtype.is_float and a.dtype.is_int) else t
    return cast(t, a), cast(t, b), t


def _check_operands(row: ops.Op, t: DType) -> None:
    if not row.accepts(t):
        need = {ops.INT: "integers", ops.INTLIKE: "integers or booleans", ops.LOGIC: "booleans",
                ops.NUM: "numbers"}.get(row.operands, "other operands")
        raise DTypeError(f"operator {row.py} needs {need}, got {t}")


def binary(op: str, a: Any, b: Any) -> Expr:
    """Build ``a op b`` with dtype promotion and folding of two constants."""
    row = ops.BINARY[op]
    ea, eb = _operands(a, b)
    if op in ("and", "or"):
        ea, eb = cast(dt.bool_, ea), cast(dt.bool_, eb)
        t = dt.bool_
    else:
        ea, eb, t = _unify(ea, eb)
        _check_operands(row, t)
    if isinstance(ea, Const) and isinstance(eb, Const):
        folded = ops.fold(row, t, ea.value, eb.value)
        if folded is not None:
            return const(folded, t)
    return BinOp(op, ea, eb)


def compare(op: str, a: Any, b: Any) -> Expr:
    """Build the comparison ``a op b`` (a boolean), folding two constants."""
    ea, eb = _operands(a, b)
    ea, eb, t = _unify(ea, eb)
    if isinstance(ea, Const) and isinstance(eb, Const):
        return const(ops.fold(ops.COMPARE[op], t, ea.value, eb.value), dt.bool_)
    return Compare(op, ea, eb)


def unary(op: str, a: Any) -> Expr:
    """Build ``-a``, ``~a`` (``not`` on booleans, ``bitnot`` on integers), folding a constant."""
    row = ops.UNARY[op]
    ea = as_expr(a)
    if op == "not":
        ea = cast(dt.bool_, ea)
    _check_operands(row, ea.dtype)
    if isinstance(ea, Const):
        folded = ops.fold(row, ea.dtype, ea.value)
        if folded is not None:
            return const(folded, ea.dtype)
    return UnaryOp(op, ea)


def cast(dtype: Any, value: Any) -> Expr:
    """``T.Cast(dtype, value)``; a no-op when the dtype already matches; constants fold."""
    t = dt.as_dtype(dtype)
    e = as_expr(value, like=t)
    if e.dtype == t:
        return e
    if isinstance(e, Const):
        return const(ops.cast_value(e.value, e.dtype, t), t)
    return Cast(t, e)


def call(name: str, *args: Any) -> Expr:
    """A math intrinsic; integer arguments of float-only functions are promoted to float32.
    Constant arguments fold."""
    row = ops.INTRINSICS.get(name)
    if row is None:
        raise KernelTypeError(f"unknown intrinsic {name!r}")
    if len(args) != row.arity:
        raise KernelTypeError(f"T.{name} takes {row.arity} argument(s), got {len(args)}")
    exprs: Sequence[Expr]
    if len(args) == 2:
        exprs = _unify(*_operands(*args))[:2]
    else:
        exprs = [as_expr(args[0])]
    if row.float_only and not exprs[0].dtype.is_float:
        exprs = [cast(dt.float32, e) for e in exprs]
    if all(isinstance(e, Const) for e in exprs):
        d = exprs[0].dtype
        folded = ops.fold(row, d, *(e.value for e in exprs))
        if folded is not None:
            return const(folded, row.result_dtype(d))
    return Call(name, tuple(exprs))


def minimum(a: Any, b: Any) -> Expr:
    return binary("min", a, b)


def maximum(a: Any, b: Any) -> Expr:
    return binary("max", a, b)


def select(cond: Any, then: Any, else_: Any) -> Expr:
    c = cast(dt.bool_, as_expr(cond))
    t, e = _operands(then, else_)
    t, e, _ = _unify(t, e)
    if isinstance(c, Const):
        return t if c.value else e
    return Select(c, t, e)


hooks.provide("cast", cast)   # T.float16(3.0) in tegula.ir.dtype
