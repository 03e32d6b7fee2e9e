"""Layouts written by the user: ``T.Layout(shape, fn)`` and ``T.Fragment(shape, ...)``.

``T.Layout([M, N], lambda i, j: (j, i))`` maps each logical index of a tile to a physical index
(the forward index), ``T.Fragment(shape, forward_thread_fn=, forward_index_fn=)`` maps it to the
thread holding it and the register in that thread (with ``replicate=r``, to the ``r`` threads
``forward_thread_fn(*idx, rep)``, ``rep < r``, each at that register). Both evaluate the user's function once on
symbolic indices, so the mapping is an IR expression that can be printed, evaluated and bounded.

What the compiler does with them (``T.annotate_layout``; see docs/language.md): a ``T.Layout``
on a shared tile is where the CUDA lowering puts its elements (:class:`SharedLayout`: element
``idx`` at the flat offset of ``fn(*idx)`` in the layout's output shape), so generated code
indexes shared memory through the user's function; a ``T.Fragment`` on a fragment is how layout
inference spreads it over the threads (:class:`UserFragment`: the user's map inverted on the host).
Placement is not observable: the interpreter ignores layouts, and kernels compute the same on
every target. Global buffers stay row-major in
their logical shape, so kernels that agree on a layout agree on the data.
"""
from __future__ import annotations

import itertools
from typing import Any, Callable, Optional, Sequence

import numpy as np

from tegula.arith.bound import bound
from tegula.arith.simplify import simplify
from tegula.errors import KernelTypeError, LayoutError
from tegula.ir import expr as E
from tegula.ir.evaluate import HostEvalError, host_lambda
from tegula.ir.expr import Expr, Var
from tegula.ir.visitor import substitute, uses_var
from tegula.layout import fragment as F
from tegula.layout.fragment import flatten


def _shape(shape: Any, what: str) -> tuple[int, ...]:
    if isinstance(shape, int):
        shape = (shape,)
    try:
        out = tuple(int(d) for d in shape)
    except (TypeError, ValueError):
        raise KernelTypeError(f"{what}: the shape must be a tuple of ints, got {shape!r}") from None
    if not out or any(d <= 0 for d in out):
        raise KernelTypeError(f"{what}: the shape must be positive ints, got {shape!r}")
    return out


def _outputs(fn: Callable, vars_: Sequence[Var], what: str) -> tuple[Expr, ...]:
    try:
        out = fn(*vars_)
    except TypeError as e:
        raise KernelTypeError(f"{what}: the function must take {len(vars_)} index argument(s) "
                              f"(one per dimension): {e}") from None
    if not isinstance(out, (list, tuple)):
        out = (out,)
    res = []
    for o in out:
        e = E.as_expr(o)
        if not e.dtype.is_int:
            raise KernelTypeError(f"{what}: the function must return integer indices, got {e}")
        res.append(e)
    return tuple(res)


def _extent(e: Expr, ranges: dict, what: str) -> int:
    """One more than the largest value of ``e`` over ``ranges`` (by bound analysis; where that
    cannot say, e.g. for XOR swizzles, by computing every value)."""
    b = bound(e, ranges)
    if b is None or b[0] is None or b[1] is None:
        vars_ = tuple(ranges)
        vals = tabulate((e,), vars_, tuple(hi + 1 for _, hi in ranges.values()), (1,), what)
        b = (int(vals.min()), int(vals.max()))
    if b[0] < 0:
        raise KernelTypeError(f"{what}: the index {e} can be negative")
    return int(b[1]) + 1


class Layout:
    """``T.Layout(shape, forward_fn)``: logical index -> physical index.

    ``output_shape`` is the extent of each physical dimension (from the bounds of the function).
    """

    def __init__(self, shape: Any, forward_fn: Callable, *, what: str = "T.Layout"):
        self.input_shape = _shape(shape, what)
        self.vars = tuple(Var(f"i{k}") for k in range(len(self.input_shape)))
        self.forward_index = _outputs(forward_fn, self.vars, what)
        ranges = {v: (0, n - 1) for v, n in zip(self.vars, self.input_shape)}
        self.output_shape = tuple(_extent(e, ranges, what) for e in self.forward_index)
        self._offsets: Optional[np.ndarray] = None

    def map_forward_index(self, indices: Sequence[Any]) -> tuple[Any, ...]:
        """The physical index of logical ``indices`` (ints give ints, expressions expressions)."""
        return _apply(self.forward_index, self.vars, indices)

    def get_forward_index(self) -> tuple[Expr, ...]:
        return self.forward_index

    def offsets(self) -> np.ndarray:
        """The row-major flat physical offset of every logical element (an array of the input
        shape), computed on the host once."""
        if self._offsets is None:
            self._offsets = tabulate(self.forward_index, self.vars, self.input_shape,
                                     self.output_shape, "T.Layout")
        return self._offsets

    def on_shared(self, buf: Any) -> "SharedLayout":
        """This layout as the shared layout of ``buf`` (its shape, or its shape after leading
        pipeline stages); a :class:`~tegula.errors.LayoutError` when it does not fit: another
        shape, or two elements at one offset."""
        shape = tuple(int(d) for d in buf.shape)
        n = len(self.input_shape)
        if shape[len(shape) - n:] != self.input_shape:
            raise LayoutError(f"T.annotate_layout: the layout of '{buf.name}' {list(shape)} is for "
                              f"shape {list(self.input_shape)}: {self.describe()}",
                              hint="give T.Layout the buffer's shape (buf.shape)")
        offs = self.offsets()
        flat = offs.ravel()
        uniq, counts = np.unique(flat, return_counts=True)
        if len(uniq) != len(flat):
            dup = int(uniq[counts > 1][0])
            a, b = (tuple(int(x) for x in np.unravel_index(i, self.input_shape))
                    for i in np.flatnonzero(flat == dup)[:2])
            raise LayoutError(f"T.annotate_layout: the layout of '{buf.name}' puts elements {a} and "
                              f"{b} at one place ({dup}): {self.describe()}",
                              hint="a layout of a shared tile must give every element its own place")
        return SharedLayout(self, shape[:len(shape) - n])

    def describe(self) -> str:
        args = ", ".join(str(v) for v in self.vars)
        outs = ", ".join(str(e) for e in self.forward_index)
        return f"T.Layout({list(self.input_shape)}, lambda {args}: [{outs}])"

    __repr__ = describe


class Fragment:
    """``T.Fragment(shape, forward_thread_fn=, forward_index_fn=, replicate=1)``: logical index
    -> (thread, register index); ``forward_fn`` may give both at once as ``(thread, index)``."""

    def __init__(self, shape: Any, forward_fn: Optional[Callable] = None,
                 forward_thread_fn: Optional[Callable] = None, replicate: int = 1,
                 forward_index_fn: Optional[Callable] = None):
        what = "T.Fragment"
        self.input_shape = _shape(shape, what)
        self.vars = tuple(Var(f"i{k}") for k in range(len(self.input_shape)))
        if not isinstance(replicate, int) or isinstance(replicate, bool) or replicate < 1:
            raise KernelTypeError(f"{what}: replicate must be a positive int, got {replicate!r}")
        self.replicate = replicate
        # with replicate > 1 the thread functions also take the replica index ``rep``: element
        # ``i`` is held by the threads ``forward_thread(*i, rep)`` for rep < replicate, each in
        # register ``forward_index(*i)``
        self.rep: Optional[Var] = Var("rep") if replicate > 1 else None
        thread_args = self.vars + ((self.rep,) if self.rep is not None else ())
        if forward_fn is not None:
            both = _outputs(forward_fn, thread_args, what)
            if len(both) < 2:
                raise KernelTypeError(f"{what}: forward_fn must return (thread, index...)")
            self.forward_thread, self.forward_index = both[0], tuple(both[1:])
        else:
            if forward_thread_fn is None or forward_index_fn is None:
                raise KernelTypeError(f"{what}: give forward_fn, or both forward_thread_fn and "
                                      "forward_index_fn")
            self.forward_thread = _outputs(forward_thread_fn, thread_args, what)[0]
            self.forward_index = _outputs(forward_index_fn, self.vars, what)
        if self.rep is not None and any(uses_var(e, self.rep) for e in self.forward_index):
            raise KernelTypeError(f"{what}: the register index cannot depend on the replica index "
                                  "(every replica of an element is in the same register)")
        ranges = {v: (0, n - 1) for v, n in zip(thread_args, self.input_shape + (replicate,))}
        self.thread_count = _extent(self.forward_thread, ranges, what)
        self.output_shape = tuple(_extent(e, ranges, what) for e in self.forward_index)

    @property
    def thread_vars(self) -> tuple[Var, ...]:
        """The arguments of the thread function: the indices, then the replica index."""
        return self.vars + ((self.rep,) if self.rep is not None else ())

    @property
    def thread_shape(self) -> tuple[int, ...]:
        return self.input_shape + ((self.replicate,) if self.rep is not None else ())

    def map_forward_thread(self, indices: Sequence[Any]) -> Any:
        """The thread of logical ``indices`` (with replicate > 1, the replica index after them)."""
        return _apply((self.forward_thread,), self.thread_vars, indices)[0]

    def map_forward_index(self, indices: Sequence[Any]) -> tuple[Any, ...]:
        return _apply(self.forward_index, self.vars, indices)

    def get_thread_size(self) -> int:
        return self.thread_count

    def on_fragment(self, buf: Any, threads: int) -> "UserFragment":
        """This layout as the layout of fragment ``buf`` in a block of ``threads`` threads (what
        layout inference and the CUDA lowering use); a :class:`~tegula.errors.LayoutError` when
        it cannot be: another shape or thread count, or not one register per element."""
        name = f"'{buf.name}' {list(buf.shape)}"
        if tuple(int(d) for d in buf.shape) != self.input_shape:
            raise LayoutError(f"T.annotate_layout: the layout of {name} is for shape "
                              f"{list(self.input_shape)}: {self.describe()}")
        if self.thread_count != threads:
            raise LayoutError(f"T.annotate_layout: the layout of {name} spreads it over "
                              f"{self.thread_count} threads, the kernel has {threads}: {self.describe()}",
                              hint="a fragment's layout covers every thread of the block")
        return UserFragment(self)

    def describe(self) -> str:
        args = ", ".join(str(v) for v in self.vars)
        targs = ", ".join(str(v) for v in self.thread_vars)
        outs = ", ".join(str(e) for e in self.forward_index)
        rep = f", replicate={self.replicate}" if self.rep is not None else ""
        return (f"T.Fragment({list(self.input_shape)}, forward_thread_fn=lambda {targs}: "
                f"{self.forward_thread}{rep}, forward_index_fn=lambda {args}: [{outs}])")

    __repr__ = describe


def _apply(exprs: Sequence[Expr], vars_: Sequence[Var], indices: Sequence[Any]) -> tuple[Any, ...]:
    if len(indices) != len(vars_):
        raise KernelTypeError(f"the layout takes {len(vars_)} indices, got {len(indices)}")
    vmap = {v: E.as_expr(i) for v, i in zip(vars_, indices)}
    out = []
    for e in exprs:
        r = simplify(substitute(e, vmap))
        out.append(int(r.value) if isinstance(r, E.Const) else r)
    return tuple(out)


def tabulate(exprs: Sequence[Expr], vars_: Sequence[Var], in_shape: Sequence[int],
             out_shape: Sequence[int], what: str) -> np.ndarray:
    """Row-major flat offsets in ``out_shape`` of ``exprs`` at every index of ``in_shape``."""
    pos = {v: k for k, v in enumerate(vars_)}

    def var_text(v: Var, bind: Any) -> str:
        if v not in pos:
            raise HostEvalError(f"'{v.name}' is not an index of the layout")
        return f"v[{pos[v]}]"

    try:
        fn = host_lambda(tuple(exprs), var_text)
        vals = [fn(idx) for idx in itertools.product(*(range(n) for n in in_shape))]
    except (HostEvalError, ZeroDivisionError) as e:
        raise KernelTypeError(f"{what}: the layout cannot be computed for every index: {e}") from None
    arr = np.array(vals, dtype=np.int64).reshape(len(vals), len(exprs))
    flat = np.zeros(len(vals), np.int64)
    for k, n in enumerate(out_shape):
        flat = flat * int(n) + arr[:, k]
    return flat.reshape(tuple(in_shape))


class SharedLayout:
    """A user's ``T.Layout`` as the layout of a shared tile (what the CUDA lowering reads):
    element ``idx`` at ``flatten(fn(*idx))`` in the layout's output shape; ``lead`` dimensions
    (pipeline stages) before the layout's own are laid out one tile after another."""

    def __init__(self, layout: Layout, lead: tuple[int, ...] = ()):
        self.layout, self.lead = layout, tuple(lead)
        self.tile = 1
        for d in layout.output_shape:
            self.tile *= int(d)
        self.shape = self.lead + layout.input_shape

    @property
    def size(self) -> int:
        """Elements of shared memory the tile occupies."""
        n = self.tile
        for d in self.lead:
            n *= d
        return n

    @property
    def chunk(self) -> int:
        """The longest run (a power of two, at most the last dimension) of consecutive elements
        of a row that stays consecutive and aligned in memory (vector accesses need one)."""
        offs = self.layout.offsets()
        last = offs.shape[-1]
        rows = offs.reshape(-1, last)
        v = 1
        while last % (2 * v) == 0:
            w = 2 * v
            runs = rows.reshape(rows.shape[0], last // w, w)
            ok = (runs[..., 0] % w == 0).all() and (runs - runs[..., :1] == np.arange(w)).all()
            if not ok:
                break
            v = w
        return v

    def staged(self, stages: int) -> "SharedLayout":
        """The layout of ``stages`` copies of the tile (a pipeline's buffers)."""
        return SharedLayout(self.layout, (stages,) + self.lead)

    def offset(self, idx: Sequence[Any]) -> Expr:
        n = len(self.lead)
        lead, tail = list(idx[:n]), list(idx[n:])
        tile = flatten(self.layout.map_forward_index(tail), self.layout.output_shape)
        if lead:
            tile = flatten(lead, self.lead) * self.tile + tile
        return E.as_expr(tile)

    def describe(self) -> str:
        stages = f"{list(self.lead)} x " if self.lead else ""
        return stages + self.layout.describe()

    __repr__ = describe


def _bit_fields(values: np.ndarray) -> Optional[tuple[int, list[tuple[int, int, int]]]]:
    """``values[t]`` as ``base + sum(((t >> shift) % 2**width) * weight)`` over bit fields of
    ``t`` (``len(values)`` a power of two), or None when it is not of that form."""
    n = len(values)
    bits = n.bit_length() - 1
    base = int(values[0])
    w = [int(values[1 << b]) - base for b in range(bits)]
    t = np.arange(n)
    fit = base + sum(((t >> b) & 1) * w[b] for b in range(bits)) if bits else np.full(n, base)
    if not np.array_equal(fit, values):
        return None
    fields: list[tuple[int, int, int]] = []
    b = 0
    while b < bits:
        if w[b] == 0:
            b += 1
            continue
        e = b + 1
        while e < bits and w[e] == w[b] << (e - b):
            e += 1
        fields.append((b, e - b, w[b]))
        b = e
    return base, fields


class UserFragment(F.Fragment):
    """A user's ``T.Fragment`` as a fragment layout (:mod:`tegula.layout.fragment`): register
    ``k`` of thread ``t`` holds the element the user's function sends to ``(t, k)``.

    The inverse is found on the host: for each register, the element's coordinates as sums of
    bit fields of the thread index (what layouts built from ``//``, ``%`` and strides give). A
    layout that gives some ``(thread, register)`` two elements, leaves one empty, or whose inverse
    is not of that form is a :class:`~tegula.errors.LayoutError`."""

    def __init__(self, frag: Fragment):
        self.user = frag
        self.shape = frag.input_shape
        self.threads = frag.thread_count
        regs = 1
        for d in frag.output_shape:
            regs *= int(d)
        self.local_size = regs
        T = self.threads
        rep = frag.replicate
        thread = tabulate((frag.forward_thread,), frag.thread_vars, frag.thread_shape, (1,), "T.Fragment")
        reg = tabulate(frag.forward_index, frag.vars, frag.input_shape, frag.output_shape, "T.Fragment")
        if rep > 1:  # the replica index is the last axis of ``thread``
            reg = np.broadcast_to(reg[..., None], thread.shape)
        slot = (thread * regs + reg).ravel()
        owner = np.full(T * regs, -1, np.int64)
        owner[slot] = np.arange(slot.size) // rep
        hits = np.bincount(slot, minlength=T * regs) if slot.size and slot.min() >= 0 else None
        if slot.size != T * regs or hits is None or (hits != 1).any():
            each = f"{rep} (thread, register) pairs" if rep > 1 else "one (thread, register)"
            raise LayoutError(f"T.Fragment: the layout does not give every (thread, register) "
                              f"exactly one element: {frag.describe()}",
                              hint=f"each element needs {each} of its own, and each register one element")
        self.table = owner.reshape(T, regs)               # [thread, register] -> flat element
        if T & (T - 1) or regs & (regs - 1):
            raise LayoutError(f"T.Fragment: {T} threads of {regs} registers; tegula inverts layouts "
                              f"over powers of two: {frag.describe()}")
        # coordinates as functions of u = t * regs + k: sums of bit fields of u
        coords = np.stack(np.unravel_index(self.table.ravel(), self.shape), axis=-1)
        self._kbits = regs.bit_length() - 1
        self._fields = [_bit_fields(coords[:, d]) for d in range(len(self.shape))]
        if any(f is None for f in self._fields):
            raise LayoutError(f"T.Fragment: tegula cannot invert this layout (an element's place is "
                              f"not a sum of bit fields of the thread and register index): "
                              f"{frag.describe()}")
        # the bits of the thread index that no coordinate depends on tell the replicas apart
        used = 0
        for _, fields in self._fields:
            for shift, width, _ in fields:
                used |= ((1 << width) - 1) << shift
        free = [b for b in range((T * regs).bit_length() - 1) if not used >> b & 1]
        if (1 << len(free)) != rep or any(b < self._kbits for b in free):
            raise LayoutError(f"T.Fragment: tegula cannot tell the {rep} replicas of an element "
                              f"apart by bits of the thread index: {frag.describe()}")
        self.replica_mask = sum(1 << (b - self._kbits) for b in free)

    def coords(self, t: Expr, k: Any) -> tuple[Expr, ...]:
        kb = self._kbits

        def bits(shift: int, width: int) -> Any:
            """Bits ``shift .. shift + width`` of ``t * regs + k`` (a field lies in one of them,
            or is split at bit ``kb``)."""
            if shift >= kb:
                s = shift - kb
                part = t // (1 << s) if s else t
                return part % (1 << width) if (1 << (s + width)) < self.threads else part
            if shift + width <= kb:
                part = k // (1 << shift) if shift else k
                return part % (1 << width) if shift + width < kb else part
            low = kb - shift
            return bits(shift, low) + bits(kb, width - low) * (1 << low)

        out = []
        for base, fields in self._fields:
            e: Any = base
            for shift, width, weight in fields:
                part = bits(shift, width)
                part = part * weight if weight != 1 else part
                e = part if isinstance(e, int) and e == 0 else e + part
            out.append(E.as_expr(e))
        return tuple(out)

    def key(self) -> tuple:
        return (self.shape, self.threads, self.table.tobytes())

    def primary(self, t: Expr) -> Optional[Expr]:
        """The condition for thread ``t`` to be the one replica that writes an element out
        (None: every element has one holder)."""
        if not self.replica_mask:
            return None
        return E.compare("eq", E.binary("bitand", t, self.replica_mask), 0)

    def vec_width(self) -> int:
        flat = self.table
        v = 1
        while self.local_size % (2 * v) == 0 and self.shape[-1] % (2 * v) == 0:
            w = 2 * v
            runs = flat.reshape(self.threads, self.local_size // w, w)
            if not ((runs[..., 0] % w == 0).all() and (runs - runs[..., :1] == np.arange(w)).all()):
                break
            v = w
        return v

    def describe(self) -> str:
        return self.user.describe()
