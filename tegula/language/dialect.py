"""TileLang's CUDA-dialect names beyond the tile ops: warp-level exchange and votes, lane and warp
indices, register-budget hints, the rest of the math library, fast-math intrinsics and small
integer helpers.

Warp-level names (``T.shfl_sync``, ``T.warp_reduce_sum``, ``T.any_sync``, ...) are thread-level
code: they need the thread index (``T.get_thread_binding()``), and run one lane per thread on the
interpreter (as the emulator runs them) and as ``__shfl_*_sync`` on CUDA. Example::

    with T.Kernel(1, threads=64):
        tx = T.get_thread_binding()
        s = T.warp_reduce_sum(A[tx])        # the sum of A over this thread's warp
        B[tx] = T.shfl_sync(A[tx], 0)       # lane 0's value, in every lane of the warp
"""
from __future__ import annotations

from typing import Any, Callable

from tegula.errors import KernelTypeError, ScopeError
from tegula.ir import dtype as dt
from tegula.ir import expr as E
from tegula.ir.buffer import Buffer
from tegula.ir.stmt import Break, BufferStore, Continue, Evaluate
from tegula.language import primitives as P
from tegula.language.builder import current
from tegula.language.parser import Ref, loop_control

__all__ = [
    "acos",
    "acosh",
    "align_up",
    "all_sync",
    "annotate_consumer_reg_alloc",
    "annotate_producer_reg_dealloc",
    "any_sync",
    "asin",
    "asinh",
    "atan",
    "atan2",
    "atanh",
    "ballot",
    "ballot_sync",
    "bitwise_and",
    "bitwise_not",
    "bitwise_or",
    "bitwise_xor",
    "cdiv",
    "copysign",
    "cosh",
    "dec_max_nreg",
    "disable_warp_group_reg_alloc",
    "fabs",
    "fast_rcp",
    "fma",
    "fmul",
    "get_lane_idx",
    "get_warp_group_idx",
    "get_warp_idx",
    "get_warp_idx_sync",
    "hypot",
    "ieee_add",
    "ieee_fdiv",
    "ieee_fmaf",
    "ieee_frcp",
    "ieee_frsqrt",
    "ieee_fsqrt",
    "ieee_mul",
    "ieee_sub",
    "inc_max_nreg",
    "is_f8f6f4_family",
    "is_float4",
    "is_float4_e2m1_unpacked",
    "is_float4_e2m1fn",
    "ldexp",
    "long",
    "nearbyint",
    "nextafter",
    "no_set_max_nreg",
    "shfl_down",
    "shfl_sync",
    "shfl_up",
    "short",
    "shuffle_elect",
    "sinh",
    "sync_warp",
    "warp_reduce_bitand",
    "warp_reduce_bitor",
    "warp_reduce_max",
    "warp_reduce_min",
    "warp_reduce_sum",
    "get_thread_extent", "get_thread_extents", "get_thread_bindings", "get_block_bindings",
    "annotate_l2_hit_ratio", "annotate_restrict_buffers", "func_attr", "SharedBuffer",
    "LocalBuffer", "FragmentBuffer", "Unroll", "Vectorized", "parallel", "handle",
    "float8_e8m0fnu", "tfloat32", "async_copy", "warpgroup_fence_operand", "index_to_coordinates",
    "If", "Then", "Else", "loop_break", "break_loop", "continue_loop", "get_block_extent",
    "get_block_extents", "device_assert", "atomic_addx2", "atomic_addx4", "Ref", "alloc_tmem",
    "tcgen05_gemm", "tcgen05_mma_arrive",
]

WARP = 32

# -- math ------------------------------------------------------------------------------------

acos, acosh, asin, asinh, atan, atanh, sinh, cosh, nearbyint = (
    P._intrinsic(n) for n in ("acos", "acosh", "asin", "asinh", "atan", "atanh", "sinh", "cosh", "nearbyint"))
atan2, hypot, copysign, nextafter = (P._intrinsic(n) for n in ("atan2", "hypot", "copysign", "nextafter"))
fast_rcp = P._intrinsic("fast_rcp")
# ``T.__exp(x)`` and friends: CUDA's fast-math intrinsics (``__expf``): the function's value, with
# the CUDA Math API's error bounds on the GPU
__exp, __exp10, __log, __log2, __log10, __sin, __cos, __tan = (
    P._intrinsic(f"__{n}") for n in ("exp", "exp10", "log", "log2", "log10", "sin", "cos", "tan"))
FAST_MATH = {f"__{n}": globals()[f"__{n}"] for n in ("exp", "exp10", "log", "log2", "log10", "sin", "cos", "tan")}


def fabs(x: Any) -> Any:
    """``T.fabs(x)``: ``|x|`` (TVM's name for ``T.abs``). All targets."""
    return P.abs(x)


def ldexp(x: Any, e: Any) -> Any:
    """``T.ldexp(x, e)``: ``x * 2**e`` for a float ``x`` and an integer ``e``. All targets."""
    xe = E.as_expr(x)
    d = xe.dtype if xe.dtype.is_float else dt.float32
    return E.cast(d, P.exp2(E.cast(dt.float32, e))) * E.cast(d, xe)


def fma(a: Any, b: Any, c: Any) -> Any:
    """``T.fma(a, b, c)``: ``a * b + c`` (CUDA contracts it to one fused multiply-add). All targets."""
    return E.as_expr(a) * b + c


def fmul(a: Any, b: Any) -> Any:
    """``T.fmul(a, b)``: ``a * b``. All targets."""
    return E.as_expr(a) * b


def _ieee(name: str, fn: Callable, arity: int) -> Callable:
    def f(*args: Any, rounding: str = "rn") -> Any:
        if rounding != "rn":
            from tegula.errors import UnsupportedError

            raise UnsupportedError(f"T.{name}: rounding mode {rounding!r} is not supported; tegula "
                                   "computes in round-to-nearest-even", hint="use rounding='rn'")
        if len(args) == arity + 1 and isinstance(args[-1], str):  # rounding given positionally
            return f(*args[:-1], rounding=args[-1])
        if len(args) != arity:
            raise KernelTypeError(f"T.{name} takes {arity} operand(s), got {len(args)}")
        return fn(*args)

    f.__name__ = name
    f.__doc__ = (f"``T.{name}(...)``: IEEE-754 {name[5:]} rounded to nearest even (``rounding='rn'``, "
                 "the only mode tegula takes). All targets.")
    return f


ieee_add = _ieee("ieee_add", lambda a, b: E.as_expr(a) + b, 2)
ieee_sub = _ieee("ieee_sub", lambda a, b: E.as_expr(a) - b, 2)
ieee_mul = _ieee("ieee_mul", lambda a, b: E.as_expr(a) * b, 2)
ieee_fmaf = _ieee("ieee_fmaf", lambda a, b, c: E.as_expr(a) * b + c, 3)
ieee_fdiv = _ieee("ieee_fdiv", lambda a, b: E.as_expr(a) / b, 2)
ieee_frcp = _ieee("ieee_frcp", lambda a: 1.0 / E.as_expr(a), 1)
ieee_fsqrt = _ieee("ieee_fsqrt", lambda a: P.sqrt(a), 1)
ieee_frsqrt = _ieee("ieee_frsqrt", lambda a: 1.0 / P.sqrt(a), 1)


def _bitwise(name: str, op: str) -> Callable:
    def f(a: Any, b: Any) -> Any:
        if P._is_py(a, b) and isinstance(a, int) and isinstance(b, int):
            return {"bitand": a & b, "bitor": a | b, "bitxor": a ^ b}[op]
        return E.binary(op, a, b)

    f.__name__ = name
    f.__doc__ = f"``T.{name}(a, b)``: the integers' bits combined (``a {'&|^'[('bitand', 'bitor', 'bitxor').index(op)]} b``). All targets."
    return f


bitwise_and = _bitwise("bitwise_and", "bitand")
bitwise_or = _bitwise("bitwise_or", "bitor")
bitwise_xor = _bitwise("bitwise_xor", "bitxor")


def bitwise_not(a: Any) -> Any:
    """``T.bitwise_not(a)``: ``~a`` on an integer. All targets."""
    return ~a if isinstance(a, int) and not isinstance(a, bool) else E.unary("bitnot", a)


def cdiv(a: Any, b: Any) -> Any:
    """``T.cdiv(a, b)``: ``ceil(a / b)`` for integers (``T.ceildiv``). All targets."""
    return P.ceildiv(a, b)


def align_up(x: Any, alignment: Any) -> Any:
    """``T.align_up(x, a)``: the least multiple of ``a`` not below ``x`` (integers). All targets.
    Example: ``T.align_up(100, 64) == 128``."""
    return P.ceildiv(x, alignment) * alignment


short, long = dt.int16, dt.int64  # TVM's C-style names
handle = dt.handle  # an address parameter: ``p: T.handle``
float8_e8m0fnu = dt.float8_e8m0fnu  # fp8 exponent-only block scales (MX formats)
tfloat32 = dt.float32  # TileLang's tf32: float32 storage; tegula computes in float32


def _dtype_is(names: tuple) -> Callable:
    def f(dtype: Any) -> bool:
        try:
            return dt.as_dtype(dtype).name in names
        except (TypeError, ValueError):
            return False
    return f


is_float4 = _dtype_is(("float4_e2m1fn",))
is_float4.__doc__ = "``T.is_float4(dtype)``: whether ``dtype`` is a 4-bit float (host helper)."
is_float4_e2m1fn = _dtype_is(("float4_e2m1fn",))
is_float4_e2m1fn.__doc__ = "``T.is_float4_e2m1fn(dtype)``: whether ``dtype`` is fp4 e2m1 (host helper)."
is_float4_e2m1_unpacked = _dtype_is(())
is_float4_e2m1_unpacked.__doc__ = ("``T.is_float4_e2m1_unpacked(dtype)``: always False: tegula has no "
                                   "unpacked fp4 dtype (host helper).")
is_f8f6f4_family = _dtype_is(("float8_e4m3", "float8_e5m2", "float4_e2m1fn"))
is_f8f6f4_family.__doc__ = ("``T.is_f8f6f4_family(dtype)``: whether ``dtype`` is an fp8 or fp4 type the "
                            "block-scaled MMA takes (host helper).")

# -- lanes, warps ----------------------------------------------------------------------------


def _tx(what: str) -> E.Expr:
    k = current(what).require_kernel(what)
    P._thread_var(k)
    return P.get_thread_binding(0)


def _need_threads(what: str) -> None:
    """Warp exchanges need each thread's own code: a kernel that has bound the thread index."""
    k = current(what).require_kernel(what)
    if k.thread_var is None:
        raise ScopeError(f"{what} exchanges values between the threads of a warp; it needs "
                         "thread-level code", hint="bind the thread index with T.get_thread_binding()")


def get_lane_idx(warp_size: Any = None) -> E.Expr:
    """``T.get_lane_idx(warp_size=32)``: this thread's lane in its warp, ``threadIdx.x % 32``
    (thread-level code). All targets."""
    return _tx("T.get_lane_idx") % (WARP if warp_size is None else warp_size)


def get_warp_idx(warp_size: Any = None, block_extent: Any = None, warp_group_size: Any = None) -> E.Expr:
    """``T.get_warp_idx()``: this thread's warp in the block, ``threadIdx.x // 32``
    (thread-level code). All targets."""
    return _tx("T.get_warp_idx") // (WARP if warp_size is None else warp_size)


def get_warp_idx_sync(warp_size: Any = None, block_extent: Any = None, warp_group_size: Any = None) -> E.Expr:
    """``T.get_warp_idx_sync()``: ``T.get_warp_idx()`` (the warp-uniform spelling). All targets."""
    return _tx("T.get_warp_idx_sync") // (WARP if warp_size is None else warp_size)


def get_warp_group_idx(warp_size: Any = None, warps_per_group: Any = None, block_extent: Any = None) -> E.Expr:
    """``T.get_warp_group_idx()``: this thread's warpgroup (4 warps), ``threadIdx.x // 128``
    (thread-level code). All targets."""
    return _tx("T.get_warp_group_idx") // ((WARP if warp_size is None else warp_size) * (warps_per_group or 4))


def shuffle_elect(thread_extent: int = WARP) -> E.Expr:
    """``T.shuffle_elect(n)``: true in one thread (the first) of each group of ``n`` threads
    (thread-level code). All targets."""
    return E.compare("eq", _tx("T.shuffle_elect") % thread_extent, 0)


def sync_warp(mask: Any = None) -> None:
    """``T.sync_warp()``: ``__syncwarp()``: the lanes of this warp wait for each other and see
    each other's memory writes (thread-level code; the emulator checks the whole warp arrives).
    All targets."""
    _tx("T.sync_warp")
    current().emit(Evaluate(E.Builtin("sync_warp", (), dt.bool_)))


def _shuffle(name: str, builtin: str, doc: str) -> Callable:
    def f(value: Any, lane: Any, width: Any = WARP, mask: Any = None) -> E.Expr:
        _need_threads(f"T.{name}")
        v = value.as_load() if isinstance(value, Buffer) else E.as_expr(value)
        if not isinstance(width, int) or width not in (1, 2, 4, 8, 16, 32):
            raise KernelTypeError(f"T.{name}: width must be a power of two up to 32, got {width!r}")
        return E.Builtin(builtin, (v, E.as_expr(lane), E.as_expr(width)), v.dtype)

    f.__name__ = name
    f.__doc__ = doc
    return f


shfl_sync = _shuffle("shfl_sync", "shfl_idx", """``T.shfl_sync(value, src_lane, width=32)``:
    ``value`` as lane ``src_lane`` of this thread's group of ``width`` lanes holds it
    (``__shfl_sync``; thread-level code). All targets.""")
shfl_down = _shuffle("shfl_down", "shfl_down", """``T.shfl_down(value, delta, width=32)``:
    ``value`` of lane ``lane + delta`` (this lane's own where that leaves the group of ``width``
    lanes; ``__shfl_down_sync``; thread-level code). All targets.""")
shfl_up = _shuffle("shfl_up", "shfl_up", """``T.shfl_up(value, delta, width=32)``: ``value`` of
    lane ``lane - delta`` (this lane's own where that leaves the group of ``width`` lanes;
    ``__shfl_up_sync``; thread-level code). All targets.""")


def _warp_reduce(what: str, value: Any, combine: Callable, dtype: Any = None) -> E.Expr:
    """``value`` combined over the 32 lanes of this warp by a butterfly of shfl_xor (every lane
    gets the result)."""
    _need_threads(what)
    v = value.as_load() if isinstance(value, Buffer) else E.as_expr(value)
    d = dt.as_dtype(dtype) if dtype is not None else v.dtype
    acc = P.alloc_var(d, init=E.cast(d, v))
    b = current()
    for mask in (16, 8, 4, 2, 1):
        cur = acc.as_load()
        b.emit(BufferStore(acc, (E.const(0),), combine(cur, E.Builtin("shfl_xor", (cur, E.const(mask), E.const(WARP)), d))))
    return acc.as_load()


def _reducer(name: str, combine: Callable, doc: str) -> Callable:
    def f(value: Any) -> E.Expr:
        return _warp_reduce(f"T.{name}", value, combine)

    f.__name__ = name
    f.__doc__ = doc
    return f


warp_reduce_sum = _reducer("warp_reduce_sum", lambda a, b: a + b, """``T.warp_reduce_sum(value)``:
    the sum of ``value`` over the 32 lanes of this warp, in every lane (thread-level code). All targets.""")
warp_reduce_max = _reducer("warp_reduce_max", E.maximum, """``T.warp_reduce_max(value)``: the
    largest ``value`` of this warp's lanes, in every lane (thread-level code). All targets.""")
warp_reduce_min = _reducer("warp_reduce_min", E.minimum, """``T.warp_reduce_min(value)``: the
    smallest ``value`` of this warp's lanes, in every lane (thread-level code). All targets.""")
warp_reduce_bitand = _reducer("warp_reduce_bitand", lambda a, b: E.binary("bitand", a, b),
                              """``T.warp_reduce_bitand(value)``: the bitwise and of this warp's
    lanes' integers, in every lane (thread-level code). All targets.""")
warp_reduce_bitor = _reducer("warp_reduce_bitor", lambda a, b: E.binary("bitor", a, b),
                             """``T.warp_reduce_bitor(value)``: the bitwise or of this warp's
    lanes' integers, in every lane (thread-level code). All targets.""")


def _pred(p: Any) -> E.Expr:
    e = E.as_expr(p)
    return E.cast(dt.int32, e if e.dtype.is_bool else E.compare("ne", e, 0))


def any_sync(predicate: Any, mask: Any = None) -> E.Expr:
    """``T.any_sync(pred)``: non-zero (1) in every lane when ``pred`` holds in some lane of this
    warp (``__any_sync``; thread-level code). All targets."""
    return _warp_reduce("T.any_sync", _pred(predicate), E.maximum)


def all_sync(predicate: Any, mask: Any = None) -> E.Expr:
    """``T.all_sync(pred)``: 1 in every lane when ``pred`` holds in all lanes of this warp
    (``__all_sync``; thread-level code). All targets."""
    return _warp_reduce("T.all_sync", _pred(predicate), E.minimum)


def ballot_sync(predicate: Any, mask: Any = None) -> E.Expr:
    """``T.ballot_sync(pred)``: a ``uint64`` whose bit ``n`` is set when ``pred`` holds in lane
    ``n`` of this warp (``__ballot_sync``; thread-level code). All targets."""
    _need_threads("T.ballot_sync")
    bit = E.binary("shl", E.cast(dt.uint32, _pred(predicate)), E.cast(dt.uint32, get_lane_idx()))
    return E.cast(dt.uint64, _warp_reduce("T.ballot_sync", bit, lambda a, b: E.binary("bitor", a, b)))


def ballot(predicate: Any) -> E.Expr:
    """``T.ballot(pred)``: ``T.ballot_sync(pred)`` over the whole warp. All targets."""
    return ballot_sync(predicate)


# -- register budgets of warp-specialized kernels --------------------------------------------


def dec_max_nreg(reg_count: int) -> None:
    """``T.dec_max_nreg(n)``: ``T.set_max_nreg(n, 0)``: this warpgroup lowers its register budget
    to ``n`` per thread (sm_90a ``setmaxnreg``; nothing on the interpreter)."""
    from tegula.language.hopper import set_max_nreg

    set_max_nreg(reg_count, 0)


def inc_max_nreg(reg_count: int) -> None:
    """``T.inc_max_nreg(n)``: ``T.set_max_nreg(n, 1)``: this warpgroup raises its register budget
    to ``n`` per thread (sm_90a ``setmaxnreg``; nothing on the interpreter)."""
    from tegula.language.hopper import set_max_nreg

    set_max_nreg(reg_count, 1)


def _annotate(what: str, key: str, value: Any) -> None:
    k = current(what).require_kernel(what)
    k.annotations[key] = value


def disable_warp_group_reg_alloc() -> None:
    """``T.disable_warp_group_reg_alloc()``: a kernel the compiler warp-specializes keeps the
    registers ptxas gives it (no ``setmaxnreg`` in its producer and consumers). Only the sm_90a
    WarpSpecialize pass reads it; other targets have nothing to change."""
    _annotate("T.disable_warp_group_reg_alloc", "ws_regs", None)


def no_set_max_nreg() -> None:
    """``T.no_set_max_nreg()``: ``T.disable_warp_group_reg_alloc()``."""
    _annotate("T.no_set_max_nreg", "ws_regs", None)


def annotate_producer_reg_dealloc(reg_count: int = 24) -> None:
    """``T.annotate_producer_reg_dealloc(n=24)``: the register budget the producer warpgroup of a
    kernel the compiler warp-specializes lowers to (sm_90a; other targets ignore it)."""
    _check_regs("T.annotate_producer_reg_dealloc", reg_count)
    k = current("T.annotate_producer_reg_dealloc").require_kernel("T.annotate_producer_reg_dealloc")
    old = k.annotations.get("ws_regs", (None, None)) or (None, None)
    k.annotations["ws_regs"] = (int(reg_count), old[1])


def annotate_consumer_reg_alloc(reg_count: int = 240) -> None:
    """``T.annotate_consumer_reg_alloc(n=240)``: the register budget the consumer warpgroups of a
    kernel the compiler warp-specializes raise to (sm_90a; other targets ignore it)."""
    _check_regs("T.annotate_consumer_reg_alloc", reg_count)
    k = current("T.annotate_consumer_reg_alloc").require_kernel("T.annotate_consumer_reg_alloc")
    old = k.annotations.get("ws_regs", (None, None)) or (None, None)
    k.annotations["ws_regs"] = (old[0], int(reg_count))


def _check_regs(what: str, n: Any) -> None:
    if not isinstance(n, int) or isinstance(n, bool) or not 24 <= n <= 256 or n % 8:
        raise KernelTypeError(f"{what}: the register count must be a multiple of 8 in 24..256, got {n!r}")


# -- thread indices and extents ----------------------------------------------------------------


def get_thread_extent(dim: int = 0) -> int:
    """``T.get_thread_extent(dim=0)``: the number of threads of the block along ``dim`` (as
    ``T.Kernel(..., threads=)`` gave them). All targets."""
    k = current("T.get_thread_extent").require_kernel("T.get_thread_extent")
    dims = tuple(k.threads) + (1,) * (3 - len(k.threads))
    if not isinstance(dim, int) or not 0 <= dim < 3:
        raise KernelTypeError(f"T.get_thread_extent: dim must be 0, 1 or 2, got {dim!r}")
    return int(dims[dim])


def get_thread_extents() -> list:
    """``T.get_thread_extents()``: the block's thread extents along x, y, z. All targets."""
    return [get_thread_extent(d) for d in range(3)]


def get_thread_bindings() -> list:
    """``T.get_thread_bindings()``: ``[threadIdx.x, threadIdx.y, threadIdx.z]`` (thread-level
    code, as ``T.get_thread_binding``). All targets."""
    return [P.get_thread_binding(d) for d in range(3)]


def get_block_bindings() -> list:
    """``T.get_block_bindings()``: ``[blockIdx.x, blockIdx.y, blockIdx.z]`` of the enclosing
    ``T.Kernel``. All targets."""
    from tegula.language.lowlevel import get_block_binding

    return [get_block_binding(d) for d in range(3)]


# -- hints that change no result -------------------------------------------------------------


def annotate_l2_hit_ratio(*args: Any, **kwargs: Any) -> None:
    """``T.annotate_l2_hit_ratio(buffer, ratio)``: an L2 persistence hint for a global buffer.
    It changes no result; tegula's launches keep the default L2 policy (all targets accept it)."""
    current("T.annotate_l2_hit_ratio").require_kernel("T.annotate_l2_hit_ratio")


def annotate_restrict_buffers(*buffers: Any) -> None:
    """``T.annotate_restrict_buffers(A, B, ...)``: the buffers do not alias. tegula already
    treats distinct kernel parameters as not aliasing, so it changes nothing (all targets)."""
    current("T.annotate_restrict_buffers").require_kernel("T.annotate_restrict_buffers")


def func_attr(attrs: dict) -> None:
    """``T.func_attr({...})``: TVM function attributes (``global_symbol``, ``tir.noalias``, ...).
    tegula's functions carry no TVM attributes and none of these changes a result, so it is
    accepted and changes nothing (all targets)."""
    if not isinstance(attrs, dict):
        raise KernelTypeError(f"T.func_attr takes a dict of attributes, got {type(attrs).__name__}")


# -- buffer annotations of macro parameters ----------------------------------------------------


class BufferAnnotation:
    """``T.SharedBuffer(shape, dtype)``, ``T.LocalBuffer(...)``, ``T.FragmentBuffer(...)`` (also
    ``T.SharedBuffer[shape, dtype]``): the type of a ``@T.macro`` parameter that receives a buffer
    of that scope. The argument passes as the buffer itself; the annotation documents it. As the
    parameter of a ``@T.prim_func`` (whose parameters are global tensors) it is an error."""

    def __init__(self, scope: str):
        self.scope = scope

    def __call__(self, shape: Any, dtype: Any = "float32", *args: Any, **kwargs: Any) -> "BufferAnnotation":
        out = BufferAnnotation(self.scope)
        out.shape, out.dtype = shape, dtype
        return out

    def __getitem__(self, key: Any) -> "BufferAnnotation":
        return self(*key) if isinstance(key, tuple) else self(key)

    def __repr__(self) -> str:
        name = {"shared.dyn": "SharedBuffer", "local": "LocalBuffer", "local.fragment": "FragmentBuffer"}[self.scope]
        return f"T.{name}"


SharedBuffer = BufferAnnotation("shared.dyn")
LocalBuffer = BufferAnnotation("local")
FragmentBuffer = BufferAnnotation("local.fragment")
Unroll = P.unroll
Vectorized = P.vectorized


def parallel(start: Any, stop: Any = None, annotations: Any = None) -> Any:
    """``T.parallel(start, stop)`` (TIR's spelling): ``T.Parallel`` over ``range(start, stop)``;
    ``stop - start`` must be a constant. All targets."""
    if stop is None:
        return P.Parallel(start)
    spec = P.Parallel(E.as_expr(stop) - start if not P._is_py(start, stop) else stop - start)
    return P.LoopSpec("parallel", (start,), spec.extents, 1, spec.annotations)


def async_copy(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
    """``T.async_copy(src, dst)``: copy ``src`` to ``dst`` (TileLang issues ``cp.async``). tegula
    copies as ``T.copy`` does and makes it asynchronous itself where a pipeline allows
    (``T.Pipelined``), so the data are in ``dst`` when the next statement runs. All targets."""
    P.copy(src, dst)


def warpgroup_fence_operand(*args: Any, **kwargs: Any) -> None:
    """``T.warpgroup_fence_operand(buf)``: keeps the compiler from moving accesses of a wgmma's
    register operand across the asynchronous MMA. tegula's wgmma lowering places these fences
    itself, so it changes nothing (all targets)."""
    current("T.warpgroup_fence_operand").require_kernel("T.warpgroup_fence_operand")


def index_to_coordinates(index: Any, shape: Any) -> list:
    """``T.index_to_coordinates(i, shape)``: the row-major coordinates of flat index ``i`` in
    ``shape``. Example: ``index_to_coordinates(7, (2, 4)) == [1, 3]``. All targets."""
    out = []
    for d in reversed(tuple(shape)):
        out.append(index % d)
        index = index // d
    return out[::-1]


# -- TIR script's if frames --------------------------------------------------------------------


class _Branch:
    """``T.Then()`` / ``T.Else()``: the branches of a ``with T.If(cond):`` block."""

    def __init__(self, name: str):
        self.name = name

    def tegula_with(self, parser: Any, item: Any, body: list) -> None:
        from tegula.errors import KernelSyntaxError

        raise KernelSyntaxError(f"`with T.{self.name}():` belongs directly inside `with T.If(cond):`",
                                hint="with T.If(c):\n    with T.Then(): ...\n    with T.Else(): ...")


class _IfFrame:
    """``with T.If(cond):`` holding ``with T.Then(): ...`` and an optional ``with T.Else(): ...``
    (TIR script's spelling of ``if cond: ... else: ...``, which it becomes)."""

    def tegula_with(self, parser: Any, item: Any, body: list) -> None:
        import ast

        from tegula.errors import KernelSyntaxError

        call = item.context_expr
        if not isinstance(call, ast.Call) or len(call.args) != 1 or call.keywords:
            raise KernelSyntaxError("T.If takes one condition: `with T.If(cond):`")
        branches: dict = {}
        for st in body:
            ctx = parser.eval(st.items[0].context_expr) if isinstance(st, ast.With) and len(st.items) == 1 else None
            if not isinstance(ctx, _Branch) or ctx.name in branches or (ctx.name == "Else" and "Then" not in branches):
                raise KernelSyntaxError("the body of `with T.If(cond):` is `with T.Then(): ...` and then, "
                                        "optionally, `with T.Else(): ...`", parser.src.span(st))
            branches[ctx.name] = st.body
        if "Then" not in branches:
            raise KernelSyntaxError("`with T.If(cond):` needs a `with T.Then():` block")
        node = ast.If(test=call.args[0], body=branches["Then"], orelse=branches.get("Else", []))
        parser.visit_If(ast.copy_location(node, call))


def If(cond: Any) -> _IfFrame:  # noqa: N802 (TIR's name)
    """``with T.If(cond): with T.Then(): ... with T.Else(): ...``: TIR script's if statement, the
    same statement as ``if cond: ... else: ...`` in a kernel. All targets."""
    return _IfFrame()


def Then() -> _Branch:  # noqa: N802
    """``with T.Then():``: the branch of ``with T.If(cond):`` taken when ``cond`` holds."""
    return _Branch("Then")


def Else() -> _Branch:  # noqa: N802
    """``with T.Else():``: the branch of ``with T.If(cond):`` taken when ``cond`` does not hold."""
    return _Branch("Else")


# -- loop exits --------------------------------------------------------------------------------


def loop_break() -> None:
    """``T.loop_break()``: Python's ``break`` in a kernel loop (serial, unrolled, pipelined or
    ``while``; not ``T.Parallel``). All targets."""
    loop_control(current("T.loop_break"), Break)


def break_loop() -> None:
    """``T.break_loop()``: ``T.loop_break()`` (TIR's name)."""
    loop_break()


def continue_loop() -> None:
    """``T.continue_loop()``: Python's ``continue`` in a kernel loop (not ``T.Parallel``). All targets."""
    loop_control(current("T.continue_loop"), Continue)


def get_block_extent(dim: int = 0) -> Any:
    """``T.get_block_extent(dim=0)``: the grid's number of blocks along ``dim`` (``gridDim``; an
    int, or the expression ``T.Kernel`` was given). All targets."""
    k = current("T.get_block_extent").require_kernel("T.get_block_extent")
    if not isinstance(dim, int) or isinstance(dim, bool) or not 0 <= dim < 3:
        raise KernelTypeError(f"T.get_block_extent: dim must be 0, 1 or 2, got {dim!r}")
    return k.grid[dim] if dim < len(k.grid) else 1


def get_block_extents() -> list:
    """``T.get_block_extents()``: the grid's extents along x, y, z. All targets."""
    return [get_block_extent(d) for d in range(3)]


def device_assert(cond: Any, msg: str = "") -> None:
    """``T.device_assert(cond, msg="")``: stop the kernel where ``cond`` is false: a
    ``DeviceAssertError`` at this line naming ``msg`` on ``cpu`` and ``cuda-emu``; on a GPU the
    thread prints the message and traps (the launch fails). Example:
    ``T.device_assert(idx < N, "index out of range")``."""
    current("T.device_assert").require_kernel("T.device_assert")
    if not isinstance(msg, str):
        raise KernelTypeError(f"T.device_assert: msg must be a string, got {type(msg).__name__}")
    c = E.as_expr(cond)
    c = c if c.dtype.is_bool else E.compare("ne", c, 0)
    current().emit(Evaluate(E.Builtin("device_assert", (c,), dt.bool_, (("msg", msg),))))


# -- vector atomics ----------------------------------------------------------------------------


def _atomic_addxn(width: int) -> Callable:
    name = f"atomic_addx{width}"

    def f(dst: Any, value: Any, return_prev: bool = False) -> None:
        what = f"T.{name}"
        current(what).require_kernel(what)
        if return_prev:
            from tegula.errors import UnsupportedError

            raise UnsupportedError(f"{what}(..., return_prev=True) is not supported: the {width} previous "
                                   "values would be a vector value", hint="use T.atomic_add(x, v, return_prev=True) per element")
        loads = []
        for x, role in ((dst, "destination"), (value, "value")):
            if not isinstance(x, E.BufferLoad):
                raise KernelTypeError(f"{what} takes the first of {width} consecutive elements as its {role} "
                                      f"(X[i, j]), got {type(x).__name__}")
            loads.append(x)
        d, v = loads
        for e in range(width):  # one atomic update per element: x[..., j + e] += v[..., k + e]
            P.atomic_add(d.buffer[(*d.indices[:-1], d.indices[-1] + e)],
                         v.buffer[(*v.indices[:-1], v.indices[-1] + e)])

    f.__name__ = name
    f.__doc__ = (f"``T.{name}(X[i, j], V[k, l])``: ``X[i, j + e] += V[k, l + e]`` atomically for the "
                 f"{width} consecutive elements ``e < {width}`` (CUDA's paired/quad atomics), each "
                 "element an atomic update of its own. All targets.")
    return f


atomic_addx2 = _atomic_addxn(2)
atomic_addx4 = _atomic_addxn(4)


# -- Blackwell tensor memory and tcgen05 MMA: tile semantics on the host backends ---------------

BLACKWELL_ONLY = "blackwell_only"  # kernel annotation: (primitive, span) of the first sm_100 call


def _blackwell(what: str) -> Any:
    k = current(what).require_kernel(what)
    if BLACKWELL_ONLY not in k.annotations:
        from tegula.ir.span import current_span

        k.annotations[BLACKWELL_ONLY] = (what, current_span())
    return k


def alloc_tmem(shape: Any, dtype: Any) -> Any:
    """``T.alloc_tmem(shape, dtype)``: a tile in Blackwell's tensor memory, where ``tcgen05``
    MMAs accumulate. On ``cpu`` (the interpreter, and thread-level kernels it runs on the
    emulator) it is a fragment of the block; a CUDA build (and ``cuda-emu``) for sm_80 / sm_90a
    stops with an UnsupportedError "needs sm_100" at this line. Example::

        C_tmem = T.alloc_tmem([128, 128], T.float32)
        T.tcgen05_gemm(A_s, B_s, C_tmem, False, True, mbar=bar, clear_accum=k == 0)
        T.copy(C_tmem, C_local)
    """
    _blackwell("T.alloc_tmem")
    return P.alloc_fragment(shape, dtype)


def _arrive_once(mbar: Any) -> None:
    """One arrival on ``mbar`` by the block's first thread (what a tcgen05 commit does)."""
    tx = P.get_thread_binding(0)
    b = current()
    with b.frame() as then:
        P.mbarrier_arrive(mbar)
    from tegula.ir.stmt import IfThenElse, seq

    b.emit(IfThenElse(E.compare("eq", tx, 0), seq(*then)))


def tcgen05_gemm(A: Any, B: Any, C: Any, transpose_A: bool = False, transpose_B: bool = False,
                 policy: Any = None, clear_accum: Any = False, mbar: Any = None, **kwargs: Any) -> None:
    """``T.tcgen05_gemm(A, B, C_tmem, trans_A, trans_B, mbar=bar, clear_accum=...)``: Blackwell's
    MMA, ``C += A @ B`` into a ``T.alloc_tmem`` tile, then one arrival on ``mbar`` when given (the
    MMA's completion). Tile semantics on ``cpu``; "needs sm_100" on CUDA builds (see
    ``T.alloc_tmem``)."""
    _blackwell("T.tcgen05_gemm")
    P.gemm(A, B, C, transpose_A, transpose_B, clear_accum=clear_accum)
    if mbar is not None:
        _arrive_once(mbar)


def tcgen05_mma_arrive(mbar: Any, arrive_2cta: bool = False) -> None:
    """``T.tcgen05_mma_arrive(bar)``: one arrival on ``bar`` once this thread's earlier tcgen05
    MMAs are done (they are, on the host backends). "needs sm_100" on CUDA builds."""
    _blackwell("T.tcgen05_mma_arrive")
    _arrive_once(mbar)
