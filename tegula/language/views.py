"""Views of a buffer's memory under another shape, and ``T.im2col``.

- ``T.Tensor(shape, dtype, A.data)`` inside a kernel, ``T.reshape(A, shape)`` and
  ``T.view(A, shape)``: the elements of ``A`` (global or shared) in row-major order, seen as a
  buffer of ``shape`` (same dtype, same number of elements or fewer). Nothing is copied: element
  ``V[i, j]`` is the element of ``A`` at the same row-major position.
- ``T.transpose(src, dst)``: ``dst[..., j, i] = src[..., i, j]`` for tiles of shapes
  ``(..., M, N)`` and ``(..., N, M)`` (converting the dtype), as the ``T.Parallel`` loop it means.
- ``T.let(v, value, body)``: the expression ``body`` with ``v`` bound to ``value``.
- ``T.im2col(img, col, nhw_step, c_step, kernel, stride=1, dilation=1, pad=0)``: fills the shared
  tile ``col`` (``BM x BK``) with the patch matrix of the NHWC image ``img`` for a square
  ``kernel x kernel`` convolution: row ``r = nhw_step * BM + m`` is output pixel
  ``(n, oh, ow)`` (row-major over ``N, OH, OW``), column ``q = c_step * BK + k`` is
  ``(kh, kw, c)`` (row-major over ``kernel, kernel, C``), and the value is
  ``img[n, oh*stride + kh*dilation - pad, ow*stride + kw*dilation - pad, c]``, zero where that
  pixel is padding or ``r``, ``q`` lie past the matrix. ``OH = (H + 2*pad - dilation*(kernel-1)
  - 1) // stride + 1``, likewise ``OW``.

Views live only in the frontend: when the function is built, :func:`resolve_views` rewrites every
access of a view into an access of its buffer, and a ``T.copy`` with a view operand into the
``T.Parallel`` loop of element copies it means (reads past the view give zero, writes past it are
dropped, as ``T.copy`` defines for global memory). ``T.im2col`` is such a loop from the start.
A view of a shared or fragment tile may also be an operand of the other tile operations
(``T.gemm(T.reshape(X_shared, (BM, BK)), ...)``): the tile is then allocated under the view's
shape, and the tile's own accesses (and those of its other views) are rewritten into the view's,
so the memory is the same and only one shape reaches the IR. Two different shapes of one tile
both used by such operations, or such a view of global memory, are an UnsupportedError.
The IR, and so every target, never sees a view.
"""
from __future__ import annotations

import math
import dataclasses
from typing import Any, Optional, Sequence

from tegula.errors import KernelTypeError, ShapeError, UnsupportedError
from tegula.ir import dtype as dt
from tegula.ir import expr as E
from tegula.ir.buffer import Buffer, BufferRegion
from tegula.ir.expr import BufferLoad, Expr, Var
from tegula.ir.stmt import BufferStore, Copy, For, IfThenElse, Kernel, Stmt
from tegula.ir.visitor import Mutator, Visitor, substitute
from tegula.language import semantic
from tegula.language.builder import current

INT32_MAX = 2 ** 31 - 1


class BufferData:
    """What ``A.data`` gives: ``A``'s memory, for ``T.Tensor(shape, dtype, A.data)``."""

    def __init__(self, buffer: Buffer):
        self.buffer = buffer

    def __repr__(self) -> str:
        return f"{self.buffer.name}.data"


def make_view(base: Any, shape: Any, dtype: Any, what: str, same_size: bool = False) -> Buffer:
    """A view of ``base`` (a Buffer or ``A.data``) as ``shape``/``dtype``, registered with the
    builder so that :func:`resolve_views` rewrites its accesses."""
    b = current(what)
    base = base.buffer if isinstance(base, BufferData) else base
    if not isinstance(base, Buffer):
        raise KernelTypeError(f"{what}: expected a buffer or its .data, got {semantic.describe(base)}")
    while base in b.views:  # a view of a view sees the first buffer
        base = b.views[base]
    if not (base.is_global or base.is_shared or base.is_fragment):
        raise UnsupportedError(f"{what}: only global, shared and fragment buffers can be viewed under another "
                               f"shape; '{base.name}' is {base.scope}", hint="copy it to a fragment or shared memory first")
    shp = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    d = semantic.check_dtype(dtype, what) if dtype is not None else base.dtype
    if d != base.dtype and (d.bits != base.dtype.bits or d.is_bool or base.dtype.is_bool):
        raise UnsupportedError(f"{what}: a view as {d} ({d.bits} bits) of '{base.name}' ({base.dtype}, "
                               f"{base.dtype.bits} bits) would split or join elements; a view may change the "
                               "dtype to another of the same width only",
                               hint="reinterpret elements with T.reinterpret, or view as a dtype of the same width")
    for x in shp:
        if isinstance(x, bool) or not isinstance(x, (int, Expr)):
            raise ShapeError(f"{what}: dimension {x!r} is neither an int nor an expression")
    static = all(isinstance(x, int) for x in shp + tuple(base.shape))
    if static and same_size and math.prod(shp) != math.prod(base.shape):
        raise ShapeError(f"{what}: shape {shp} has {math.prod(shp)} elements, '{base.name}' "
                         f"{tuple(base.shape)} has {math.prod(base.shape)}", hint="a view keeps every element")
    if static and math.prod(shp) > math.prod(base.shape):
        raise ShapeError(f"{what}: a view of shape {shp} has {math.prod(shp)} elements, more than the "
                         f"{math.prod(base.shape)} of '{base.name}' {tuple(base.shape)}")
    view = Buffer(b.take_name(base.name + "_view"), shp, d, base.scope)
    b.views[view] = base
    return view


def reshape(buf: Any, shape: Any) -> Buffer:
    """``T.reshape(A, shape)``: ``A``'s elements seen as ``shape`` (a view; see the module docstring)."""
    return make_view(buf, shape, None, "T.reshape", same_size=True)


def view(buf: Any, shape: Any = None, dtype: Any = None) -> Buffer:
    """``T.view(A, shape, dtype=None)``: as :func:`reshape`; with ``dtype`` of the same width as
    ``A``'s (``float32`` as ``int32``, ``float16`` as ``bfloat16``) each element's bits read as
    ``dtype``. All targets."""
    base = buf.buffer if isinstance(buf, BufferData) else buf
    return make_view(buf, shape if shape is not None else getattr(base, "shape", ()), dtype, "T.view",
                     same_size=True)


# -- rewriting views away --------------------------------------------------------------------------

def _wide(e: Expr, big: bool) -> Expr:
    e = E.as_expr(e)
    return E.cast(dt.int64, e) if big and e.dtype != dt.int64 else e


def remap(view_shape: Sequence[Any], base_shape: Sequence[Any], idx: Sequence[Any]) -> tuple:
    """Indices into ``base_shape`` of the element at ``idx`` of a row-major view of it."""
    vs, bs, idx = list(view_shape), list(base_shape), list(idx)
    tail: list = []
    while vs and bs and len(vs) > 1 and len(bs) > 1 and _same(vs[-1], bs[-1]):
        vs.pop()
        bs.pop()
        tail.insert(0, idx.pop())
    n = math.prod(x for x in base_shape if isinstance(x, int))
    big = n > INT32_MAX or not all(isinstance(x, int) for x in base_shape)
    flat: Expr = E.const(0)
    for i, ext in zip(idx, vs):
        flat = flat * _wide(ext, big) + _wide(i, big)
    out = []
    for j in range(len(bs)):
        inner = math.prod(bs[j + 1:]) if all(isinstance(x, int) for x in bs[j + 1:]) else None
        stride: Any = inner if inner is not None else _prod(bs[j + 1:])
        q = flat // _wide(stride, big) if j < len(bs) - 1 else flat
        out.append(q % _wide(bs[j], big) if j > 0 else q)
    return tuple(out) + tuple(tail)


def _prod(xs: Sequence[Any]) -> Expr:
    out: Expr = E.const(1)
    for x in xs:
        out = out * E.as_expr(x)
    return out


def _alike(a: Buffer, b: Buffer) -> bool:
    """Whether ``a`` and ``b`` have one shape and dtype (a region of one is a region of the other)."""
    return a.dtype == b.dtype and len(a.shape) == len(b.shape) and all(_same(x, y) for x, y in zip(a.shape, b.shape))


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, int) or isinstance(b, int):
        return a == b
    return a is b


def _in_view(view: Buffer, idx: Sequence[Expr]) -> Optional[Expr]:
    cond: Optional[Expr] = None
    for i, ext in zip(idx, view.shape):
        c = E.compare("lt", i, E.as_expr(ext))
        cond = c if cond is None else E.binary("and", cond, c)
    return cond


def _copy_loop(c: Copy, views: dict) -> Stmt:
    """``T.copy`` with a view operand as the loop of element copies it means."""
    src, dst = c.src, c.dst
    s_ext = [e for _, e in src.ranges]
    d_ext = [e for _, e in dst.ranges]
    s_dims = [k for k, e in enumerate(s_ext) if not (isinstance(e, int) and e == 1)]
    d_dims = [k for k, e in enumerate(d_ext) if not (isinstance(e, int) and e == 1)]
    if len(s_dims) != len(d_dims) or not all(isinstance(s_ext[a], int) and isinstance(d_ext[b], int)
                                             and s_ext[a] == d_ext[b] for a, b in zip(s_dims, d_dims)):
        raise ShapeError(f"T.copy: the tiles {tuple(s_ext)} and {tuple(d_ext)} differ in shape", c.span)
    loop_vars = [Var(f"v{k}") for k in range(len(s_dims))]

    def at(r: BufferRegion, dims: list) -> list:
        idx = [E.as_expr(st) for st, _ in r.ranges]
        for v, k in zip(loop_vars, dims):
            idx[k] = idx[k] + v
        return idx

    si, di = at(src, s_dims), at(dst, d_dims)
    value: Expr = BufferLoad(src.buffer, tuple(si))
    if src.buffer in views:
        value = BufferLoad(views[src.buffer], remap(src.buffer.shape, views[src.buffer].shape, si))
        value = _bits_as(value, src.buffer.dtype)
        value = E.select(_in_view(src.buffer, si), value, E.cast(src.buffer.dtype, E.const(0)))
    value = E.cast(dst.buffer.dtype, value) if value.dtype != dst.buffer.dtype else value
    if dst.buffer in views:
        body: Stmt = BufferStore(views[dst.buffer], remap(dst.buffer.shape, views[dst.buffer].shape, di),
                                 _bits_as(value, views[dst.buffer].dtype), span=c.span)
        body = IfThenElse(_in_view(dst.buffer, di), body, span=c.span)
    else:
        body = BufferStore(dst.buffer, tuple(di), value, span=c.span)
    for v, k in reversed(list(zip(loop_vars, s_dims))):
        body = For(v, E.const(0), s_ext[k], body, "parallel", span=c.span)
    return body


def _bits_as(e: Expr, d: Any) -> Expr:
    """``e``'s bits read as ``d`` (a view of another dtype of the same width), or ``e``."""
    return e if e.dtype == d else E.Builtin("bitcast", (e,), d)


def _tile_operands(body: Stmt, members: set) -> list:
    """``(buffer, span)`` of each region of a buffer in ``members`` that a tile operation other
    than ``T.copy`` takes, in program order (a copy of a view is a loop of element copies)."""
    found: list = []

    class V(Visitor):
        span = None

        def visit_Copy(self, c: Copy) -> None:
            pass

        def visit_BufferRegion(self, r: BufferRegion) -> None:
            if r.buffer in members:
                found.append((r.buffer, self.span))

        def generic_visit(self, node: Any) -> None:
            if isinstance(node, Stmt):
                self.span = getattr(node, "span", None)
            super().generic_visit(node)

    V().visit(body)
    return found


def _storage(body: Stmt, views: dict) -> tuple:
    """Which buffer holds each viewed tile's memory: ``(aliases, moved)`` where ``aliases`` maps
    every view (and every tile that a view of it replaces) to the buffer its accesses go to, and
    ``moved`` maps such a tile to the view that is allocated in its place."""
    groups: dict = {}
    for v, base in views.items():
        groups.setdefault(base, [base]).append(v)
    uses = _tile_operands(body, set(views) | set(groups))
    aliases, moved = dict(views), {}
    for base, members in groups.items():
        used = [(m, sp) for m, sp in uses if m in members]
        if not used:
            continue
        first, span = used[0]
        for m, sp in used:
            if not _alike(m, first):
                raise UnsupportedError(
                    f"'{first.name}' {tuple(first.shape)} and '{m.name}' {tuple(m.shape)} are two shapes of "
                    f"the memory of '{base.name}', and tile operations other than T.copy use both", sp,
                    hint="give the tile operations one shape of it, or T.copy one shape into a tile of its own")
        if first is base:  # its views used by tile operations have its shape: the tile stays
            continue
        if not (base.is_shared or base.is_fragment):
            raise UnsupportedError(f"'{first.name}' is a view of '{base.name}' ({base.scope}): tile operations "
                                   "other than T.copy can use views of shared and fragment tiles only", span,
                                   hint=f"T.copy the view into a shared tile first, or use '{base.name}'")
        n_base = math.prod(base.shape) if all(isinstance(x, int) for x in base.shape) else None
        n_view = math.prod(first.shape) if all(isinstance(x, int) for x in first.shape) else None
        if n_base is None or n_base != n_view:
            raise UnsupportedError(f"'{first.name}' {tuple(first.shape)} is a view of part of '{base.name}' "
                                   f"{tuple(base.shape)}: a tile operation other than T.copy can use a view only "
                                   "of a whole tile", span, hint="view the tile under a shape with as many elements")
        del aliases[first]
        for m in members:
            if m is not first:
                aliases[m] = first
        moved[base] = first
    return aliases, moved


def resolve_views(body: Stmt, views: dict) -> Stmt:
    """``body`` with every access of a view (``views``: view -> its buffer) made on the buffer;
    a tile whose view a tile operation other than ``T.copy`` takes is allocated as that view
    (module docstring). Raises UnsupportedError for views that cannot be so resolved."""
    if not views:
        return body
    views, moved = _storage(body, views)

    class M(Mutator):
        def visit_Kernel(self, k: Kernel) -> Any:
            k = self.generic_visit(k)
            if not any(a in moved for a in k.allocs):
                return k
            annotated = [a for a in (k.annotations.get("layout_map") or {}) if a in moved]
            if annotated:
                a = annotated[0]
                raise UnsupportedError(f"'{a.name}' has an annotated layout, and a tile operation uses it as "
                                       f"'{moved[a].name}' {tuple(moved[a].shape)}", k.span,
                                       hint=f"annotate the layout of '{moved[a].name}' instead")
            return dataclasses.replace(k, allocs=tuple(moved.get(a, a) for a in k.allocs))

        def visit_BufferLoad(self, n: BufferLoad) -> Any:
            idx = tuple(self.visit(i) for i in n.indices)
            if n.buffer in views:
                load = BufferLoad(views[n.buffer], remap(n.buffer.shape, views[n.buffer].shape, idx))
                return _bits_as(load, n.buffer.dtype)
            return BufferLoad(n.buffer, idx) if idx != n.indices else n

        def visit_BufferStore(self, s: BufferStore) -> Any:
            idx = tuple(self.visit(i) for i in s.indices)
            value = self.visit(s.value)
            buf = s.buffer
            if buf in views:
                return BufferStore(views[buf], remap(buf.shape, views[buf].shape, idx),
                                   _bits_as(value, views[buf].dtype), span=s.span)
            return BufferStore(buf, idx, value, span=s.span)

        def visit_BufferRegion(self, r: BufferRegion) -> Any:
            r = self.generic_visit(r)
            if r.buffer in views and _alike(r.buffer, views[r.buffer]):
                return dataclasses.replace(r, buffer=views[r.buffer])
            return r

        def visit_Copy(self, c: Copy) -> Any:
            if c.src.buffer in views or c.dst.buffer in views:
                return self.visit(_copy_loop(c, views))
            return self.generic_visit(c)

    out = M().visit(body)

    class Check(Visitor):
        def visit_BufferRegion(self, r: BufferRegion) -> None:
            if r.buffer in views:
                raise UnsupportedError(f"'{r.buffer.name}' is a view of '{views[r.buffer].name}': tile operations "
                                       "other than T.copy cannot use it", self.span,
                                       hint=f"T.copy the view into a tile first, or use '{views[r.buffer].name}'")

        def generic_visit(self, node: Any) -> None:
            if isinstance(node, Stmt):
                self.span = getattr(node, "span", None)
            super().generic_visit(node)

    chk = Check()
    chk.span = None
    chk.visit(out)
    return out


# -- T.transpose, T.let ------------------------------------------------------------------------------

def transpose(src: Any, dst: Any, annotations: Optional[dict] = None) -> None:
    """``T.transpose(src, dst)``: ``dst[..., j, i] = src[..., i, j]`` (see the module docstring).
    Raises ShapeError when the shapes are not each other's transpose."""
    b = current("T.transpose")
    b.require_kernel("T.transpose")
    s = semantic.to_region(src, "T.transpose")
    d = semantic.to_region(dst, "T.transpose")
    se, de = [e for _, e in s.ranges], [e for _, e in d.ranges]
    if len(se) < 2 or len(se) != len(de) or not all(isinstance(x, int) for x in se + de) \
            or se[:-2] + [se[-1], se[-2]] != de:
        raise ShapeError(f"T.transpose: a tile of shape {tuple(se)} transposes to {tuple(se[:-2] + se[-1:] + se[-2:-1])}, "
                         f"not {tuple(de)}")
    vs = [Var(f"t{k}") for k in range(len(se))]
    si = [E.as_expr(st) + v for (st, _), v in zip(s.ranges, vs)]
    dv = vs[:-2] + [vs[-1], vs[-2]]
    di = [E.as_expr(st) + v for (st, _), v in zip(d.ranges, dv)]
    value: Expr = BufferLoad(s.buffer, tuple(si))
    if value.dtype != d.buffer.dtype:
        value = E.cast(d.buffer.dtype, value)
    body: Stmt = BufferStore(d.buffer, tuple(di), value)
    for v, ext in reversed(list(zip(vs, se))):
        body = For(v, E.const(0), ext, body, "parallel")
    b.emit(body)


def let(v: Any, value: Any, body: Any = None) -> Expr:
    """``T.let(v, value, body)``: ``body`` with the variable ``v`` replaced by ``value``."""
    if not isinstance(v, Var):
        raise KernelTypeError(f"T.let: the first argument must be a variable, got {semantic.describe(v)}")
    if body is None:
        raise UnsupportedError("T.let without a body is not supported",
                               hint="write `x = value` in the kernel (a let), or T.let(v, value, body)")
    return substitute(E.as_expr(body), {v: E.as_expr(value)})


# -- T.im2col ---------------------------------------------------------------------------------------

def im2col(img: Any, col: Any, nhw_step: Any, c_step: Any, kernel: int, stride: int = 1,
           dilation: int = 1, pad: int = 0) -> None:
    """``T.im2col(img, col, nhw_step, c_step, kernel, stride, dilation, pad)``: the patch-matrix tile
    (see the module docstring). Raises ShapeError / KernelTypeError for operands of the wrong form."""
    b = current("T.im2col")
    b.require_kernel("T.im2col")
    if not isinstance(img, Buffer) or img.ndim != 4 or not img.is_global:
        raise KernelTypeError(f"T.im2col: the image must be a 4-d global tensor (N, H, W, C), got "
                              f"{semantic.describe(img)}")
    if not isinstance(col, Buffer) or col.ndim != 2 or not (col.is_shared or col.is_fragment):
        raise KernelTypeError(f"T.im2col: the patch tile must be a 2-d shared or fragment tile, got "
                              f"{semantic.describe(col)}")
    for name, v in (("kernel", kernel), ("stride", stride), ("dilation", dilation), ("pad", pad)):
        if not isinstance(v, int) or isinstance(v, bool) or v < (0 if name == "pad" else 1):
            raise KernelTypeError(f"T.im2col: {name} must be a {'non-negative' if name == 'pad' else 'positive'} "
                                  f"Python int, got {v!r}")
    BM, BK = col.shape
    N, H, W, C = (E.as_expr(x) for x in img.shape)
    OH = (H + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1
    OW = (W + 2 * pad - dilation * (kernel - 1) - 1) // stride + 1
    m, k = Var("m"), Var("k")
    row = E.as_expr(nhw_step) * BM + m
    q = E.as_expr(c_step) * BK + k
    n, oh, ow = row // (OH * OW), row // OW % OH, row % OW
    kh, kw, c = q // (kernel * C), q // C % kernel, q % C
    ih = oh * stride + kh * dilation - pad
    iw = ow * stride + kw * dilation - pad
    conds = [E.compare("lt", row, N * OH * OW), E.compare("lt", q, C * (kernel * kernel)),
             E.compare("ge", ih, 0), E.compare("lt", ih, H), E.compare("ge", iw, 0), E.compare("lt", iw, W)]
    cond = conds[0]
    for x in conds[1:]:
        cond = E.binary("and", cond, x)
    value = E.select(cond, BufferLoad(img, (n, ih, iw, c)), E.cast(img.dtype, E.const(0)))
    if value.dtype != col.dtype:
        value = E.cast(col.dtype, value)
    b.emit(For(m, E.const(0), BM, For(k, E.const(0), BK, BufferStore(col, (m, k), value), "parallel"),
               "parallel"))
