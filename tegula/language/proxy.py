"""Parameter declarations: ``T.Tensor``, ``T.dynamic``, ``T.const`` and ``T.empty``."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from tegula.errors import KernelTypeError, ShapeError, TegulaError
from tegula.ir import dtype as dt
from tegula.ir.buffer import FRAGMENT, GLOBAL, LOCAL, SHARED_DYN, SHARED_STATIC, Buffer
from tegula.ir.expr import Const, Expr, Var
from tegula.language import primitives as P
from tegula.language import semantic
from tegula.language.builder import active, caller_span, current
from tegula.language.views import make_view


@dataclass(frozen=True)
class TensorSpec:
    """``T.Tensor(shape, dtype)``: the type of a global tensor parameter."""

    shape: tuple
    dtype: dt.DType

    def __repr__(self) -> str:
        return f"T.Tensor({self.shape}, {self.dtype.name!r})"


def _shape(shape: Any, what: str) -> tuple:
    if isinstance(shape, (int, Expr, ConstSymbol)) and not isinstance(shape, bool):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)):
        raise KernelTypeError(f"{what}: shape must be a tuple of ints or symbols, got {shape!r}")
    out = []
    for d in shape:
        if isinstance(d, Const):
            d = int(d.value)
        if not isinstance(d, (int, Expr, ConstSymbol)) or isinstance(d, bool):
            raise ShapeError(f"{what}: dimension {d!r} is neither an int nor a symbol")
        if isinstance(d, int) and d < 0:
            raise ShapeError(f"{what}: dimensions cannot be negative, got {tuple(shape)}")
        out.append(d)
    return tuple(out)


class _TensorType:
    """``T.Tensor((M, K), dtype)`` and ``T.Tensor[(M, K), dtype]``."""

    def __call__(self, shape: Any, dtype: Any = "float32", data: Any = None, **_: Any) -> Any:
        if data is not None:  # T.Tensor(shape, dtype, A.data) in a kernel: a view of A
            return make_view(data, shape, dtype, "T.Tensor")
        try:
            return TensorSpec(_shape(shape, "T.Tensor"), semantic.check_dtype(dtype, "T.Tensor"))
        except TegulaError as e:
            raise (e if active() is not None else e.with_span(caller_span())) from None

    def __getitem__(self, key: Any) -> TensorSpec:
        if isinstance(key, tuple) and len(key) == 2:
            return self(*key)
        raise KernelTypeError("T.Tensor[...] takes (shape, dtype)",
                              None if active() is not None else caller_span())


Tensor = _TensorType()
Buffer_ = Tensor


def dynamic(name: str, dtype: Any = "int32") -> Var:
    """A symbolic dimension bound from argument shapes at call time; ``T.dynamic("M, N")`` (names
    separated by commas or spaces, as TileLang takes them) gives a tuple of them."""
    if isinstance(name, str) and len(name.replace(",", " ").split()) > 1:
        return tuple(dynamic(n, dtype) for n in name.replace(",", " ").split())
    if not isinstance(name, str) or not name.isidentifier():
        raise KernelTypeError(f"T.dynamic: name must be an identifier string, got {name!r}", caller_span())
    return Var(name, semantic.check_dtype(dtype, "T.dynamic"))


symbolic = dynamic


class ConstSymbol:
    """A ``T.const`` shape symbol whose value is not known yet (eager style).

    It becomes the matching dimension of the first ``A: T.Tensor(...)`` annotation that uses it.
    """

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name

    def _unbound(self, *a: Any) -> Any:
        raise KernelTypeError(
            f"'{self.name}' (from T.const) has no value yet: it gets one from the first tensor "
            "annotation that uses it, or from the call", hint=f"declare the tensors (A: T.Tensor(...)) "
            f"before using {self.name}, or pass {self.name}=... to the call or to compile()")

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _unbound
    __floordiv__ = __rfloordiv__ = __truediv__ = __rtruediv__ = __mod__ = __rmod__ = _unbound
    __pow__ = __rpow__ = __neg__ = __lshift__ = __rshift__ = __and__ = __or__ = __xor__ = _unbound
    __index__ = __int__ = __bool__ = _unbound
    # comparisons too: `if K == 64:` on a symbol with no value would otherwise be a silent False
    __lt__ = __gt__ = __le__ = __ge__ = __eq__ = __ne__ = _unbound
    __hash__ = object.__hash__


def const(names: str, dtype: Any = "int32") -> Any:
    """``M, N, K = T.const("M, N, K")``: compile-time shape symbols (eager style)."""
    b = current("T.const")
    parts = [n.strip() for n in names.replace(",", " ").split()]
    if not parts or not all(p.isidentifier() for p in parts):
        raise KernelTypeError(f"T.const: expected names like \"M, N, K\", got {names!r}")
    out = []
    for p in parts:
        if p not in b.const_names:
            b.const_names.append(p)
        if p not in b.consts and p in b.shape_hints:
            b.consts[p] = b.shape_hints[p]
        if p in b.consts:
            out.append(b.consts[p])
        else:
            sym = ConstSymbol(p)
            b.placeholders.append(sym)
            out.append(sym)
    return out[0] if len(out) == 1 else tuple(out)


def empty(shape: Any, dtype: Any = "float32") -> Buffer:
    """``C = T.empty((M, N), dtype)``: an output tensor the runtime allocates (eager style)."""
    b = current("T.empty")
    if b.kernel is not None:
        raise KernelTypeError("T.empty declares a kernel output and must come before `with T.Kernel`",
                              hint="for scratch memory inside the kernel use T.alloc_shared / alloc_fragment")
    shp = _shape(shape, "T.empty")
    if any(isinstance(d, ConstSymbol) for d in shp):
        bad = next(d for d in shp if isinstance(d, ConstSymbol))
        bad._unbound()
    buf = Buffer(b.take_name("out"), shp, semantic.check_dtype(dtype, "T.empty"), "global")
    b.params.append(buf)
    b.outputs.append(buf)
    return buf


def alloc_global(shape: Any, dtype: Any, scope: str = "global") -> Buffer:
    """A global scratch tensor the runtime allocates for each call and does not return: the
    kernels of one function hand data to each other through it (split, then combine)."""
    b = current("T.alloc_global")
    shp = _shape(shape, "T.alloc_global")
    if any(isinstance(d, ConstSymbol) for d in shp):
        next(d for d in shp if isinstance(d, ConstSymbol))._unbound()
    buf = Buffer(b.take_name("workspace"), shp, semantic.check_dtype(dtype, "T.alloc_global"), "global")
    b.workspaces.append(buf)
    return buf


def alloc_buffer(shape: Any, dtype: Any, scope: str = GLOBAL) -> Buffer:
    """``T.alloc_buffer(shape, dtype, scope=)``: an allocation named by its scope. ``"global"``
    (the default) is :func:`alloc_global`; ``"shared"`` / ``"shared.dyn"``, ``"local.fragment"``
    and ``"local"`` are ``T.alloc_shared``, ``T.alloc_fragment`` and ``T.alloc_local``. Raises
    ``KernelTypeError`` for another scope."""
    if scope == GLOBAL:
        return alloc_global(shape, dtype)
    make = {SHARED_STATIC: P.alloc_shared, SHARED_DYN: P.alloc_shared, FRAGMENT: P.alloc_fragment,
            LOCAL: P.alloc_local}.get(scope)
    if make is None:
        raise KernelTypeError(f"T.alloc_buffer: unknown scope {scope!r}",
                              hint="one of 'global', 'shared', 'shared.dyn', 'local.fragment', 'local'")
    return make(shape, dtype, scope) if scope in (SHARED_STATIC, SHARED_DYN) else make(shape, dtype)


def is_tensor_annotation(x: Any) -> bool:
    return isinstance(x, TensorSpec)


def ptr_like(x: Any) -> Optional[dt.DType]:
    """Scalar parameter annotations: ``n: T.int32`` or ``n: int``."""
    if isinstance(x, dt.DType):
        return x
    if x in (int, float, bool):
        return dt.as_dtype(x)
    return None

