"""TIR-level spellings of TileLang programs: thread-level reductions, scopes, extern C code.

These are the names TileLang programs borrow from TVM's TIR, each given a meaning in tegula's own
terms (``docs/language.md``, "Thread-level code"):

- ``T.thread_binding(0, n, thread="threadIdx.x")`` / ``T.get_block_binding(dim)``: the thread
  index along one dimension (as ``T.get_thread_binding``) and the block index.
- ``with T.attr(T.comm_reducer(f, [identity]), "reduce_scope", ...):`` around
  ``T.evaluate(T.tvm_thread_allreduce(T.uint32(1), value, True, out, t, dtype="handle"))``: every
  thread gets ``out`` = ``f`` folded over ``value`` of the threads that differ only in the thread
  index ``t``. It becomes warp shuffles where those threads are lanes of one warp, a shared
  scratch array with two barriers otherwise: plain thread-level IR every target runs.
- ``T.evaluate(x)``: ``x`` for its effect.
- ``T.shift_left(a, b)`` / ``T.shift_right(a, b)``: ``a << b`` / ``a >> b``.
- ``T.dp4a(a[i], b[j], c[k])``: ``c[k] += a[i + t] * b[j + t]`` summed over ``t < 4`` (8-bit
  ints, products and sum in int32), as the ``dp4a`` instruction.
- ``T.import_source(src)`` puts C++ source in front of the kernel on the CUDA targets;
  ``T.call_extern(name, *args, dtype=)`` calls a function of it, ``T.access_ptr(buf, "r")`` is the
  address of a buffer (or of one element) to hand it. Extern C code runs only on the CUDA targets:
  the interpreter and the emulator report it.
- ``T.make_tensor(address, shape, dtype)``: the global tensor of that shape and dtype (row-major)
  at ``address``, an element of a ``T.Tensor([n], T.ptr)`` parameter (a tensor of
  ``data_ptr()``s). It is bound from there on; the addresses must be those of live tensors of
  at least that size on the kernel's device (on ``cpu`` and ``cuda-emu``, host tensors).
- ``T.alloc_reducer(shape, dtype, op="sum")`` / ``T.finalize_reducer(r)``: a tile that updates
  ``r[i] += v`` (``op="max"``: ``r[i] = T.max(r[i], v)``) from many lanes of a ``T.Parallel``
  loop accumulate into. It lives in shared memory; each update is an atomic, so the result after
  ``T.finalize_reducer`` is the whole reduction (whatever the order), as a reducer replicated
  per thread and combined at the end gives.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, Callable, Optional

from tegula.errors import KernelSyntaxError, KernelTypeError, ScopeError, UnsupportedError
from tegula.ir import dtype as dt
from tegula.ir import expr as E
from tegula.ir.buffer import GLOBAL, SHARED_DYN, AddressVar, Buffer
from tegula.ir.stmt import BufferStore, Evaluate, For, LetStmt, seq
from tegula.ir.structural import structural_equal
from tegula.language import primitives as P
from tegula.language import semantic
from tegula.language.builder import current, new_var

__all__ = ["access_ptr", "alloc_reducer", "attr", "call_extern", "comm_reducer", "dp4a", "evaluate",
           "finalize_reducer", "get_block_binding", "import_source", "make_tensor", "ptr",
           "shift_left", "shift_right", "thread_binding", "tvm_thread_allreduce"]

ptr = dt.handle  # ``T.Tensor([n], T.ptr)``: a tensor of addresses (an int64 tensor of data_ptr()s)

_THREAD_TAGS = {"threadIdx.x": 0, "threadIdx.y": 1, "threadIdx.z": 2}
WARP = 32


# -- thread and block indices --------------------------------------------------------------------

def thread_binding(start: Any, stop: Any = None, thread: str = "threadIdx.x") -> E.Expr:
    """``T.thread_binding(0, n, thread="threadIdx.x")``: the thread index along that dimension,
    which the kernel's ``threads=`` must give extent ``n``. Raises KernelTypeError otherwise."""
    if stop is None:
        start, stop = 0, start
    if thread not in _THREAD_TAGS:
        raise KernelTypeError(f"T.thread_binding: thread must be one of {', '.join(_THREAD_TAGS)}, "
                              f"got {thread!r}")
    dim = _THREAD_TAGS[thread]
    k = current("T.thread_binding").require_kernel("T.thread_binding")
    have = (tuple(k.threads) + (1, 1, 1))[dim]
    if start != 0 or stop != have:
        raise KernelTypeError(f"T.thread_binding({start}, {stop}, thread={thread!r}) does not match "
                              f"the kernel's threads={tuple(k.threads)} ({thread} has extent {have})",
                              hint=f"bind the whole dimension: T.thread_binding(0, {have}, thread={thread!r})")
    return P.get_thread_binding(dim)


def get_block_binding(dim: int = 0) -> E.Expr:
    """``blockIdx.x`` (``dim=0``), ``.y`` or ``.z`` of the enclosing ``T.Kernel``."""
    k = current("T.get_block_binding").require_kernel("T.get_block_binding")
    if not isinstance(dim, int) or isinstance(dim, bool) or not 0 <= dim < 3:
        raise KernelTypeError(f"T.get_block_binding: dim must be 0, 1 or 2, got {dim!r}")
    if dim >= len(k.block_vars):
        return E.const(0)
    return k.block_vars[dim]


def _let_value(b: Any, v: Any) -> Any:
    """What a name bound in the kernel (``tk = T.get_thread_binding(1)``: a let) stands for."""
    for frame in reversed(b.stack):
        for s in reversed(frame):
            if isinstance(s, LetStmt) and s.var is v:
                return s.value
    return v


def _thread_dim(b: Any, t: Any) -> int:
    """Which thread dimension the expression ``t`` is the index of."""
    e = _let_value(b, E.as_expr(t))
    for d in range(3):
        if structural_equal(e, E.as_expr(P.get_thread_binding(d)), map_free_vars=False):
            return d
    raise KernelTypeError(f"T.tvm_thread_allreduce: {semantic.describe(t)} is not a thread index",
                          hint="pass what T.get_thread_binding(d) or T.thread_binding(...) returned")


# -- shifts, evaluate ----------------------------------------------------------------------------

def shift_left(a: Any, b: Any) -> Any:
    """``a << b``."""
    return a << b


def shift_right(a: Any, b: Any) -> Any:
    """``a >> b`` (arithmetic for signed ``a``)."""
    return a >> b


def dp4a(a: Any, b: Any, c: Any) -> None:
    """``c += a[0:4] . b[0:4]``: ``a``, ``b`` are the first of four 8-bit ints of a buffer,
    ``c`` an int32 element (see the module docstring)."""
    bld = current("T.dp4a")
    bld.require_kernel("T.dp4a")
    for x, what in ((a, "a"), (b, "b")):
        if not isinstance(x, E.BufferLoad) or x.dtype not in (dt.int8, dt.uint8):
            raise KernelTypeError(f"T.dp4a: {what} must be an element of an int8 or uint8 buffer, got "
                                  f"{semantic.describe(x)}")
    if not isinstance(c, E.BufferLoad) or c.dtype not in (dt.int32, dt.uint32):
        raise KernelTypeError(f"T.dp4a: the accumulator must be an int32 element, got {semantic.describe(c)}")

    def at(x: E.BufferLoad, t: int) -> E.Expr:
        idx = x.indices[:-1] + (x.indices[-1] + t,)
        return E.cast(c.dtype, E.BufferLoad(x.buffer, idx))

    total: E.Expr = E.cast(c.dtype, c)
    for t in range(4):
        total = total + at(a, t) * at(b, t)
    bld.emit(BufferStore(c.buffer, c.indices, total))


def evaluate(value: Any) -> None:
    """``T.evaluate(x)``: ``x`` for its effect. A call with effects (``T.call_extern``) is
    emitted where it stands; what the T.* call already emitted (it returned None) and pure values
    leave nothing."""
    b = current("T.evaluate")
    if isinstance(value, E.Builtin) and value.attr("effect"):
        b.require_kernel("T.evaluate")
        b.emit(Evaluate(value))


# -- T.attr scopes and the thread allreduce --------------------------------------------------------

@dataclass(frozen=True)
class CommReducer:
    """``T.comm_reducer(lambda x, y: ..., [identity])``: a commutative combiner and its identity."""

    combine: Callable[[Any, Any], Any]
    identity: Any


def comm_reducer(combine: Callable[[Any, Any], Any], identity: Any) -> CommReducer:
    """A combiner of two values and its identity element (one value: a list of one)."""
    ids = list(identity) if isinstance(identity, (list, tuple)) else [identity]
    if len(ids) != 1:
        raise UnsupportedError(f"T.comm_reducer over {len(ids)} values at once is not supported",
                               hint="reduce one value per T.comm_reducer")
    try:
        n = len(inspect.signature(combine).parameters)
    except (TypeError, ValueError):
        n = 2
    if n != 2:
        raise KernelTypeError(f"T.comm_reducer: the combiner takes {n} argument(s); it must take two")
    return CommReducer(combine, ids[0])


class AttrScope:
    """``with T.attr(node, key, value):``; the statements inside see the attribute."""

    def __init__(self, node: Any, key: str, value: Any):
        self.node, self.key, self.value = node, key, value

    def tegula_with(self, parser: Any, item: Any, body: list) -> None:
        if item.optional_vars is not None:
            raise KernelSyntaxError("`with T.attr(...)` binds no name")
        k = parser.b.require_kernel("T.attr")
        k.attr_scopes.append(self)
        try:
            parser.visit_body(body)
        finally:
            k.attr_scopes.pop()


def _reduce_scope(node: Any, value: Any) -> None:
    if not isinstance(node, CommReducer):
        raise KernelTypeError(f"T.attr(..., 'reduce_scope', ...) takes a T.comm_reducer, got "
                              f"{semantic.describe(node)}")


_SWIZZLE_FUNCS = {"rasterization2DRow": "row", "rasterization2DColumn": "col"}


def _swizzle_pattern(node: Any, value: Any) -> None:
    """``(device_func, panel_size)``, what ``T.use_swizzle`` writes in TileLang's IR."""
    if not (isinstance(value, (tuple, list)) and len(value) == 2 and value[0] in _SWIZZLE_FUNCS):
        raise UnsupportedError(f"T.attr(..., 'threadblock_swizzle_pattern', {value!r}): tegula "
                               f"rasterizes by {' or '.join(_SWIZZLE_FUNCS)}",
                               hint="write T.use_swizzle(panel_size, order='row' | 'col')")
    P.use_swizzle(value[1], _SWIZZLE_FUNCS[value[0]])


def _min_blocks(node: Any, value: Any) -> None:
    P.annotate_min_blocks_per_sm(value)


def _hint(node: Any, value: Any) -> None:
    """A hint about how to compile the body; tegula's lowering makes these choices itself."""


# The keys T.attr gives a meaning: key -> the check (and effect) of its node and value. Loop
# pragmas and TIR's async scope are hints the compiler already decides on its own, accepted
# with no effect.
_ATTR_KEYS: dict[str, Callable[[Any, Any], None]] = {
    "reduce_scope": _reduce_scope,
    "threadblock_swizzle_pattern": _swizzle_pattern,
    "tl.min_blocks_per_sm": _min_blocks,
    "pragma_unroll_explicit": _hint,
    "pragma_auto_unroll_max_step": _hint,
    "pragma_scope": _hint,
    "async_scope": _hint,
}

# keys of TIR that tegula spells another way
_ATTR_INSTEAD = {
    "thread_extent": "launch threads with T.Kernel(..., threads=n) and read the index with "
                     "T.get_thread_binding()",
    "virtual_thread": "launch threads with T.Kernel(..., threads=n)",
}


def attr(node: Any, key: str, value: Any) -> AttrScope:
    """``T.attr(node, key, value)``, as a ``with`` block or a statement. Keys with a meaning:
    ``"reduce_scope"`` with a ``T.comm_reducer`` node (the reducer of the
    ``T.tvm_thread_allreduce`` inside), ``"threadblock_swizzle_pattern"`` with
    ``("rasterization2DRow" | "rasterization2DColumn", panel)`` (as ``T.use_swizzle``),
    ``"tl.min_blocks_per_sm"`` with ``n`` (as ``T.annotate_min_blocks_per_sm``); the loop
    pragmas ``pragma_unroll_explicit``, ``pragma_auto_unroll_max_step``, ``pragma_scope`` and
    ``async_scope`` are accepted hints with no effect. Raises UnsupportedError for another key."""
    current("T.attr").require_kernel("T.attr")
    rule = _ATTR_KEYS.get(key) if isinstance(key, str) else None
    if rule is None:
        import difflib

        close = difflib.get_close_matches(str(key), list(_ATTR_KEYS), n=1)
        known = f"tegula understands {', '.join(map(repr, _ATTR_KEYS))}"
        raise UnsupportedError(f"T.attr key {key!r} is not supported",
                               hint=_ATTR_INSTEAD.get(key) or (f"did you mean {close[0]!r}? " if close else "") + known)
    rule(node, value)
    return AttrScope(node, key, value)


def _reducer_in_scope(k: Any) -> CommReducer:
    for s in reversed(k.attr_scopes):
        if s.key == "reduce_scope":
            return s.node
    raise ScopeError("T.tvm_thread_allreduce needs the reducer of an enclosing "
                     "`with T.attr(T.comm_reducer(...), \"reduce_scope\", ...)`")


def _is_pow2(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def tvm_thread_allreduce(count: Any, value: Any, cond: Any, out: Any, *thread_idx: Any,
                         dtype: Any = "handle") -> None:
    """Every thread gets ``out`` = the reducer of the enclosing ``T.attr`` folded over ``value``
    of the threads that differ only in the thread index ``thread_idx`` (one index)."""
    b = current("T.tvm_thread_allreduce")
    k = b.require_kernel("T.tvm_thread_allreduce")
    red = _reducer_in_scope(k)
    if b.in_parallel:
        raise ScopeError("T.tvm_thread_allreduce is thread-level code; it cannot be in T.Parallel")
    n = E.as_expr(count)
    if not isinstance(n, E.Const) or int(n.value) != 1:
        raise UnsupportedError("T.tvm_thread_allreduce reduces one value (count T.uint32(1))")
    if cond is not True and not (isinstance(cond, E.Const) and bool(cond.value)):
        raise UnsupportedError("T.tvm_thread_allreduce with a condition other than True is not supported")
    if not isinstance(out, E.BufferLoad) or not out.buffer.is_local:
        raise KernelTypeError(f"T.tvm_thread_allreduce writes its result into an element of a "
                              f"T.alloc_local buffer, got {semantic.describe(out)}")
    if len(thread_idx) != 1:
        raise UnsupportedError(f"T.tvm_thread_allreduce over {len(thread_idx)} thread indices at once "
                               "is not supported", hint="reduce over one thread index")
    dim = _thread_dim(b, thread_idx[0])
    dims = tuple(k.threads) + (1,) * (3 - len(k.threads))
    stride = 1
    for d in dims[:dim]:
        stride *= d
    extent, nthreads = dims[dim], dims[0] * dims[1] * dims[2]
    v = E.as_expr(value)
    acc_t = out.buffer.dtype
    tid = P._thread_var(k)

    def put(x: Any) -> None:
        b.emit(BufferStore(out.buffer, out.indices, semantic.store_value(out.buffer, x)))

    if _is_pow2(extent) and _is_pow2(stride) and stride * extent <= WARP and nthreads % WARP == 0:
        put(v)  # lanes of one warp: a butterfly of shuffles
        m = stride * extent // 2
        while m >= stride:
            cur = E.cast(acc_t, out)
            put(red.combine(cur, E.Builtin("shfl_xor", (cur, E.const(m), E.const(WARP)), acc_t)))
            m //= 2
        return
    scratch = Buffer(b.take_name("allreduce"), (nthreads,), acc_t, SHARED_DYN)
    k.allocs.append(scratch)
    sync = Evaluate(E.Builtin("sync_threads", (), dt.bool_))
    b.emit(BufferStore(scratch, (tid,), E.cast(acc_t, v)))
    b.emit(sync)
    j = new_var("j")
    base = tid - E.as_expr(thread_idx[0]) * stride
    put(red.identity)
    body = BufferStore(out.buffer, out.indices, semantic.store_value(
        out.buffer, red.combine(E.cast(acc_t, out), scratch[base + j * stride])))
    b.emit(For(j, E.const(0), extent, seq([body]), "serial"))
    b.emit(sync)


# -- extern C code ---------------------------------------------------------------------------------

def import_source(source: Optional[str]) -> None:
    """``T.import_source(src)``: C++ source the CUDA module holds before this kernel (once,
    however often it is imported). ``None`` imports nothing."""
    k = current("T.import_source").require_kernel("T.import_source")
    if source is None:
        return
    if not isinstance(source, str):
        raise KernelTypeError(f"T.import_source takes C++ source text, got {semantic.describe(source)}")
    have = k.annotations.setdefault("import_source", ())
    if source not in have:
        k.annotations["import_source"] = have + (source,)


def access_ptr(buf: Any, access_mask: str = "rw", ptr_type: Any = None, content_lanes: int = 1,
               offset: Any = 0, extent: Any = None) -> E.Builtin:
    """``T.access_ptr(buf, "r")``: the address of ``buf`` (plus ``offset`` elements), or of one
    element ``buf[i, j]``, to hand to a ``T.call_extern`` function."""
    if access_mask not in ("r", "w", "rw"):
        raise KernelTypeError(f"T.access_ptr: access_mask must be 'r', 'w' or 'rw', got {access_mask!r}")
    if isinstance(buf, Buffer):
        if buf.is_fragment:
            raise ScopeError(f"T.access_ptr: fragment '{buf.name}' is spread over the threads and has no "
                             "address", hint="use T.alloc_local for a per-thread array")
        load = buf[(0,) * buf.ndim] if buf.ndim else buf[0]
        if not isinstance(offset, int) or offset:
            flat = semantic.index_list(buf, tuple(0 for _ in buf.shape))
            load = E.BufferLoad(buf, tuple(flat[:-1]) + (flat[-1] + offset,))
    elif isinstance(buf, E.BufferLoad):
        load = buf
    else:
        raise KernelTypeError(f"T.access_ptr takes a buffer or one element of it, got {semantic.describe(buf)}")
    return E.Builtin("address_of", (load,), dt.int64, (("access", access_mask),))


def call_extern(*args: Any, dtype: Any = None) -> E.Builtin:
    """``T.call_extern(name, *args, dtype=)`` (or TVM's order ``(dtype, name, *args)``): a call of
    the C function ``name`` from ``T.import_source`` (or a CUDA library). As a statement it is
    made for its effect; its value has ``dtype``."""
    if len(args) >= 2 and isinstance(args[1], str) and not isinstance(args[0], E.Expr):
        try:
            d = dt.as_dtype(args[0])
        except (TypeError, ValueError):
            d = None
        if d is not None or args[0] in ("void", "handle"):
            dtype, args = args[0], args[1:]
    if not args or not isinstance(args[0], str):
        raise KernelTypeError("T.call_extern takes the function's name first, then its arguments")
    name, rest = args[0], args[1:]
    ret = dt.bool_ if dtype in (None, "void", "handle") else semantic.check_dtype(dtype, "T.call_extern")
    exprs = tuple(a if isinstance(a, E.Expr) else E.as_expr(a) for a in rest)
    return E.Builtin("call_extern", exprs, ret, (("callee", name), ("effect", True)))


# -- reducers --------------------------------------------------------------------------------------

_REDUCER_OPS = {"sum": "add", "max": "max", "min": "min"}


def alloc_reducer(shape: Any, dtype: Any, op: str = "sum", replication: Any = None) -> Buffer:
    """A tile that ``r[i] += v`` (``op="sum"``), ``r[i] = T.max(r[i], v)`` / ``T.min`` updates
    from any lanes of a ``T.Parallel`` loop accumulate into (see the module docstring)."""
    if op not in _REDUCER_OPS:
        raise KernelTypeError(f"T.alloc_reducer: op must be one of {', '.join(_REDUCER_OPS)}, got {op!r}")
    if replication not in (None, "all", "none"):
        raise KernelTypeError(f"T.alloc_reducer: replication must be 'all' or 'none', got {replication!r}")
    k = current("T.alloc_reducer").require_kernel("T.alloc_reducer")
    buf = P.alloc_shared(shape, dtype)
    k.reducers[buf] = op
    return buf


def finalize_reducer(reducer: Any) -> None:
    """The reduction into ``reducer`` is complete here (its updates are atomics: nothing is left to
    combine; the barrier before its next use is inserted as for any shared tile)."""
    k = current("T.finalize_reducer").require_kernel("T.finalize_reducer")
    if not isinstance(reducer, Buffer) or reducer not in k.reducers:
        raise KernelTypeError(f"T.finalize_reducer takes a buffer from T.alloc_reducer, got "
                              f"{semantic.describe(reducer)}")


def reducer_update(k: Any, buf: Buffer, idx: tuple, value: Any) -> Optional[Any]:
    """The atomic that stores ``value`` into reducer ``buf[idx]`` means, or None when ``buf`` is no
    reducer. ``value`` must be ``buf[idx] + v`` (sum) or ``T.max(buf[idx], v)`` / ``T.min``."""
    op = k.reducers.get(buf)
    if op is None:
        return None
    want = {"sum": "add", "max": "max", "min": "min"}[op]
    v = value
    while isinstance(v, E.Cast):
        v = v.value
    if isinstance(v, E.BinOp) and v.op == want:
        for mine, other in ((v.a, v.b), (v.b, v.a)):
            m = mine.value if isinstance(mine, E.Cast) else mine
            if isinstance(m, E.BufferLoad) and m.buffer is buf and all(
                    structural_equal(x, y, map_free_vars=False) for x, y in zip(m.indices, idx)):
                return semantic.atomic(_REDUCER_OPS[op], E.BufferLoad(buf, tuple(idx)), other)
    form = {"sum": f"{buf.name}[i] += v", "max": f"{buf.name}[i] = T.max({buf.name}[i], v)",
            "min": f"{buf.name}[i] = T.min({buf.name}[i], v)"}[op]
    raise KernelTypeError(f"'{buf.name}' is a T.alloc_reducer(op={op!r}) tile: it is updated as "
                          f"`{form}`", hint="read it after T.finalize_reducer, e.g. with T.copy")


# -- tensors at computed addresses -----------------------------------------------------------------

def make_tensor(address: Any, shape: Any, dtype: Any = "float32", strides: Any = None) -> Buffer:
    """``T.make_tensor(ptrs[i], (M, K), dtype)``: the row-major global tensor at ``address`` (see
    the module docstring). Raises KernelTypeError for an address that is not a ``T.ptr`` value."""
    b = current("T.make_tensor")
    b.require_kernel("T.make_tensor")
    if strides is not None:
        raise UnsupportedError("T.make_tensor with strides is not supported", hint="leave strides out: row-major")
    a = E.as_expr(address)
    if a.dtype != dt.handle:
        raise KernelTypeError(f"T.make_tensor: the address must be an element of a T.Tensor(..., T.ptr) "
                              f"parameter, got a {a.dtype} value",
                              hint="declare the table of addresses as T.Tensor([n], T.ptr)")
    shp = shape if isinstance(shape, (tuple, list)) else (shape,)
    for d in shp:
        if isinstance(d, bool) or not isinstance(d, (int, E.Expr)) or isinstance(d, E.Expr) and not d.dtype.is_int:
            raise KernelTypeError(f"T.make_tensor: the shape must hold integers, got {shape!r}")
    buf = Buffer(b.take_name("tensor"), tuple(shp), semantic.check_dtype(dtype, "T.make_tensor"), GLOBAL)
    var = AddressVar(f"{buf.name}_addr", dt.handle, buffer=buf)
    buf.data = var
    b.emit(LetStmt(var, a))
    return buf
