"""Buffers and buffer regions.

A ``Buffer`` is a named, typed, multi-dimensional array in one memory scope:

- ``global``          kernel parameters, in device memory;
- ``shared`` / ``shared.dyn``  one copy per block;
- ``local.fragment``  a block-wide register tile, split across threads by layout inference;
- ``local``           per-thread registers;
- ``local.var``       a scalar (``T.alloc_var``): reading its name reads the value;
- ``l1`` / ``l0a`` / ``l0b`` / ``l0c`` / ``ub``  the on-chip memories of an Ascend NPU core
  (:mod:`tegula.ir.npu`).

Indexing a buffer with integers or expressions gives a :class:`BufferLoad`; with slices, a
:class:`BufferRegion`, the operand form of tile operations.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Sequence, Union

from tegula.errors import KernelTypeError, ShapeError
from tegula.ir import dtype as dt
from tegula.ir.dtype import DType
from tegula.ir.expr import BufferLoad, Const, Expr, Var, as_expr, const
from tegula.ir.linear import cancel
from tegula.ir.span import Span, current_span

# The memory scopes, by name; code tests a buffer's scope with Buffer.is_shared & co.
GLOBAL = "global"
SHARED_STATIC = "shared"
SHARED_DYN = "shared.dyn"
FRAGMENT = "local.fragment"
LOCAL = "local"
LOCAL_VAR = "local.var"
SHARED = (SHARED_STATIC, SHARED_DYN)
NPU_SCOPES = ("l1", "l0a", "l0b", "l0c", "ub")  # Ascend on-chip buffers
SCOPES = (GLOBAL, SHARED_STATIC, SHARED_DYN, FRAGMENT, LOCAL, LOCAL_VAR) + NPU_SCOPES
Dim = Union[int, Expr]


class Buffer:
    """A named array: ``shape`` holds ints or expressions (dynamic dims), ``scope`` is in SCOPES.

    Buffers are compared by identity. Instances are immutable by convention.
    """

    __slots__ = ("name", "shape", "dtype", "scope", "span", "strides", "data")

    def __init__(self, name: str, shape: Sequence[Dim], dtype: Any, scope: str = "global",
                 span: Optional[Span] = None, strides: Optional[Sequence[Dim]] = None,
                 data: Optional["AddressVar"] = None):
        if scope not in SCOPES:
            raise ValueError(f"unknown scope {scope!r}")
        self.name = name
        self.shape: tuple[Dim, ...] = tuple(_norm_dim(d) for d in shape)
        self.dtype: DType = dt.as_dtype(dtype)
        self.scope = scope
        self.span = span if span is not None else current_span()
        self.strides = tuple(strides) if strides is not None else None
        # T.make_tensor: a global buffer at an address the kernel computes, bound by the
        # LetStmt of this AddressVar (None for every other buffer)
        self.data = data

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def is_global(self) -> bool:
        return self.scope == GLOBAL

    @property
    def is_shared(self) -> bool:
        """In shared memory (``shared`` or ``shared.dyn``)."""
        return self.scope in SHARED

    @property
    def is_fragment(self) -> bool:
        """A block-wide register tile (``local.fragment``)."""
        return self.scope == FRAGMENT

    @property
    def is_local(self) -> bool:
        """Per-thread: ``local`` registers or a ``local.var`` scalar."""
        return self.scope in (LOCAL, LOCAL_VAR)

    @property
    def is_var(self) -> bool:
        """A ``T.alloc_var`` scalar (``local.var``)."""
        return self.scope == LOCAL_VAR

    @property
    def is_static(self) -> bool:
        return all(isinstance(d, int) for d in self.shape)

    def numel(self) -> Dim:
        n: Dim = 1
        for d in self.shape:
            n = n * d
        return n

    def nbytes(self) -> int:
        n = self.numel()
        assert isinstance(n, int), "nbytes of a buffer with dynamic shape"
        return n * self.dtype.itemsize

    def __repr__(self) -> str:
        return f"Buffer({self.name}, {list(self.shape)}, {self.dtype.name}, {self.scope})"

    # -- indexing -------------------------------------------------------------------------------
    def __getitem__(self, key: Any) -> Union[BufferLoad, "BufferRegion"]:
        if not isinstance(key, tuple):
            key = (key,)
        if self.is_var and key in ((0,), ()):
            return BufferLoad(self, (const(0),))
        if len(key) != self.ndim:
            raise ShapeError(f"buffer '{self.name}' has {self.ndim} dimension(s) but is indexed with {len(key)}")
        if any(isinstance(k, slice) for k in key):
            ranges = []
            for k, dim in zip(key, self.shape):
                if isinstance(k, slice):
                    if k.step not in (None, 1):
                        raise KernelTypeError(f"slices of '{self.name}' must have step 1")
                    start = as_expr(0 if k.start is None else k.start)
                    stop = dim if k.stop is None else k.stop
                    ranges.append((start, _extent(start, stop)))
                else:
                    ranges.append((as_expr(k), 1))
            return BufferRegion(self, tuple(ranges))
        return BufferLoad(self, tuple(as_expr(k) for k in key))

    def region(self) -> "BufferRegion":
        """The whole buffer as a region."""
        return BufferRegion(self, tuple((const(0), d) for d in self.shape))

    # A local.var buffer stands for its value inside expressions.
    def as_load(self) -> BufferLoad:
        if not self.is_var:
            raise KernelTypeError(
                f"buffer '{self.name}' is used as a value; index it (e.g. {self.name}[i]) to read an element")
        return BufferLoad(self, (const(0),))

    def _value(self) -> Expr:
        return self.as_load()

    # Arithmetic on a scalar variable reads it (``x + 1`` where ``x = T.alloc_var(...)``).
    def __add__(self, o: Any) -> Expr: return self._value() + o
    def __radd__(self, o: Any) -> Expr: return o + self._value()
    def __sub__(self, o: Any) -> Expr: return self._value() - o
    def __rsub__(self, o: Any) -> Expr: return o - self._value()
    def __mul__(self, o: Any) -> Expr: return self._value() * o
    def __rmul__(self, o: Any) -> Expr: return o * self._value()
    def __truediv__(self, o: Any) -> Expr: return self._value() / o
    def __rtruediv__(self, o: Any) -> Expr: return o / self._value()
    def __floordiv__(self, o: Any) -> Expr: return self._value() // o
    def __rfloordiv__(self, o: Any) -> Expr: return o // self._value()
    def __mod__(self, o: Any) -> Expr: return self._value() % o
    def __rmod__(self, o: Any) -> Expr: return o % self._value()
    def __neg__(self) -> Expr: return -self._value()
    def __lt__(self, o: Any) -> Expr: return self._value() < o
    def __le__(self, o: Any) -> Expr: return self._value() <= o
    def __gt__(self, o: Any) -> Expr: return self._value() > o
    def __ge__(self, o: Any) -> Expr: return self._value() >= o
    def __and__(self, o: Any) -> Expr: return self._value() & o
    def __or__(self, o: Any) -> Expr: return self._value() | o
    def __invert__(self) -> Expr: return ~self._value()

    def astype(self, dtype: Any) -> Expr:
        return self._value().astype(dtype)

    __hash__ = object.__hash__

    def __eq__(self, o: object) -> Any:  # type: ignore[override]
        if self.is_var and not isinstance(o, Buffer):
            return self._value() == o
        return self is o

    def __ne__(self, o: object) -> Any:  # type: ignore[override]
        if self.is_var and not isinstance(o, Buffer):
            return self._value() != o
        return self is not o


def _norm_dim(d: Any) -> Dim:
    if isinstance(d, Expr):
        if isinstance(d, Const):
            return int(d.value)
        return d
    if isinstance(d, bool) or not hasattr(d, "__index__"):
        raise ShapeError(f"a buffer dimension must be an integer or an expression, got {d!r}")
    return int(d.__index__())


def _extent(start: Expr, stop: Any) -> Dim:
    stop_e = as_expr(stop)
    if isinstance(start, Const) and isinstance(stop_e, Const):
        return int(stop_e.value) - int(start.value)
    # ``x * 64 : x * 64 + 64`` has extent 64: like terms cancel
    ext = cancel(stop_e - start)
    return int(ext.value) if isinstance(ext, Const) else ext


@dataclass(frozen=True, eq=False)
class BufferRegion:
    """A rectangular tile of a buffer: per dimension ``(start, extent)``."""

    buffer: Buffer
    ranges: tuple[tuple[Expr, Dim], ...]
    span: Optional[Span] = field(default=None, kw_only=True, repr=False)

    def __post_init__(self) -> None:
        if self.span is None:
            object.__setattr__(self, "span", current_span())

    __hash__ = object.__hash__

    @property
    def extents(self) -> tuple[Dim, ...]:
        return tuple(e for _, e in self.ranges)

    @property
    def starts(self) -> tuple[Expr, ...]:
        return tuple(s for s, _ in self.ranges)

    @property
    def dtype(self) -> DType:
        return self.buffer.dtype

    def tile_shape(self) -> tuple[Dim, ...]:
        """Extents with unit dimensions removed (how tile operations compare shapes)."""
        return tuple(e for e in self.extents if not (isinstance(e, int) and e == 1))

    def __repr__(self) -> str:
        return f"BufferRegion({self.buffer.name}, {self.ranges})"


@dataclass(frozen=True, eq=False)
class AddressVar(Var):
    """The address a ``T.make_tensor`` buffer starts at: a ``handle`` variable whose LetStmt binds
    ``buffer`` (a global buffer of that shape and dtype at that address) for the statements after
    it."""

    buffer: Any = field(default=None, repr=False)
