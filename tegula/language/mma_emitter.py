"""``TensorCoreIntrinEmitter``: warp-level tensor-core code written by hand (thread-level kernels).

A kernel that manages its own registers calls the emitter's methods where a tile-level kernel
would write ``T.gemm``. Each method emits thread-level IR at the call site (the kernel becomes
thread-level code, as with ``T.get_thread_binding``): ``ldmatrix`` loads of the warp's operand
tiles from shared memory into ``T.alloc_local`` registers, ``mma.sync`` on those registers, and
the stores of the accumulator registers to a shared or global buffer. The block's warps form a
``block_row_warps x block_col_warps`` grid; warp ``w`` is at row ``w // block_col_warps`` and
column ``w % block_col_warps``, and owns a ``warp_row_tiles x warp_col_tiles`` part of C.

Registers per thread (what ``T.alloc_local`` must provide), for ``warp_rows = warp_row_tiles /
16`` and ``warp_cols = warp_col_tiles / 16``:

- A: ``warp_rows * local_size_a``, ``local_size_a = 16 * micro_size_k / 32``; registers
  ``[i * local_size_a, ...)`` hold the ``mma`` A fragment of the warp's i-th 16-row tile;
- B: ``warp_cols * local_size_b``, the B fragments of both n8 halves of each 16-column tile;
- C: ``warp_rows * warp_cols * local_size_out``, ``local_size_out = 8``: register
  ``(i * warp_cols + j) * 8 + e`` holds the element of 16x16 tile ``(i, j)`` that
  :func:`tegula.layout.mma.c_coords` gives.

The interpreter and ``cuda-emu`` run the emitted code lane by lane with these PTX fragment
layouts; the CUDA targets print it as ``tl::ldmatrix`` / ``tl::mma_*`` calls. Shared operands are
addressed through their layouts (``T.annotate_layout``), so a swizzle given by the user is the
address every lane computes.
"""
from __future__ import annotations

from typing import Any, Optional

from tegula.errors import KernelTypeError, UnsupportedError
from tegula.ir import dtype as dt
from tegula.ir import expr as E
from tegula.ir.buffer import Buffer
from tegula.ir.expr import BufferLoad
from tegula.ir.stmt import BufferStore, Evaluate, For
from tegula.language import primitives as P
from tegula.language.builder import caller_span, current
from tegula.layout.mma import WARP, a_lane_offsets, b_lane_offsets, c_coords, micro_size

_MMA = {("float16", "float32"): "tl::mma_m16n8k16_f16_f32",
        ("bfloat16", "float32"): "tl::mma_m16n8k16_bf16_f32",
        ("int8", "int32"): "tl::mma_m16n8k32_s8_s32",
        ("uint8", "int32"): "tl::mma_m16n8k32_u8_s32"}


def _addr(load: BufferLoad, ctype: Optional[str] = None) -> E.Builtin:
    attrs = (("ctype", ctype),) if ctype else ()
    return E.Builtin("address_of", (load,), dt.int64, attrs)


def _emit_call(name: str, *args: E.Expr, template: tuple = ()) -> None:
    attrs = (("template", tuple(template)),) if template else ()
    current().emit(Evaluate(E.Builtin(name, tuple(args), dt.bool_, attrs)))


def _buffer(x: Any, what: str, scopes: tuple, role: str) -> Buffer:
    if not isinstance(x, Buffer) or not any(getattr(x, f"is_{s}") for s in scopes):
        raise KernelTypeError(f"{what}: {role} must be a {' or '.join(scopes)} buffer, got {x!r}")
    return x


def _need_size(buf: Buffer, n: int, what: str) -> None:
    size = 1
    for d in buf.shape:
        if not isinstance(d, int):
            return
        size *= d
    if size < n:
        raise KernelTypeError(f"{what}: '{buf.name}' holds {size} elements per thread, the emitter "
                              f"needs {n}", hint="allocate it with T.alloc_local of the emitter's "
                              "warp_rows/warp_cols times local_size_a/b/out")


def _lane_loads(dst: Buffer, base: int, n: int, src: Any) -> None:
    """``dst[base + 4 * r + q] = src(r, q)`` for the ``n`` bytes of a lane's 8-bit mma operand
    registers (register ``r``, byte ``q``): what ``ldmatrix`` would load, element by element,
    where the operand's storage order needs a transpose of bytes (the PTX ISA's m16n8k32
    fragments: A register ``r`` holds row ``g + 8 * (r % 2)``, columns ``16 * (r // 2) + 4 * t
    + q``; B register ``r`` column ``g + 8 * (r // 2)``, rows ``16 * (r % 2) + 4 * t + q``, for
    ``g = lane // 4``, ``t = lane % 4``)."""
    b = current("TensorCoreIntrinEmitter")
    e = E.Var(b.take_name("e"))
    b.emit(For(e, E.const(0), n, BufferStore(dst, (base + e,), E.cast(dst.dtype, src(e // 4, e % 4))),
               "unroll"))


class TensorCoreIntrinEmitter:
    """Emits ``ldmatrix`` / ``mma.sync`` / accumulator stores for one block (module docstring).

    ``a_transposed``: A is stored ``[K, M]`` (else ``[M, K]``); ``b_transposed``: B is stored
    ``[N, K]`` (else ``[K, N]``); 8-bit operands in the order ``ldmatrix`` cannot transpose
    (A ``[K, M]``, B ``[K, N]``) are loaded element by element. ``chunk`` is the K extent of the
    shared tiles each group of warps reads; ``reduce_k`` groups split the block's K (the kernel
    adds their accumulators, e.g. with ``T.tvm_thread_allreduce`` over ``T.get_thread_binding(1)``).
    """

    def __init__(self, a_dtype: Any = "float16", b_dtype: Any = "float16",
                 accum_dtype: Any = "float16", a_transposed: bool = False,
                 b_transposed: bool = False, block_row_warps: int = 2, block_col_warps: int = 2,
                 warp_row_tiles: int = 8, warp_col_tiles: int = 8, chunk: int = 16,
                 reduce_k: int = 1, num_elems_per_byte: int = 1, is_m_first: bool = False,
                 thread_var: Any = None):
        what = "TensorCoreIntrinEmitter"
        where = caller_span()  # the user's line making the emitter
        self.a_dtype, self.b_dtype = dt.as_dtype(a_dtype), dt.as_dtype(b_dtype)
        self.accum_dtype = dt.as_dtype(accum_dtype)
        key = (self.a_dtype.name, self.accum_dtype.name)
        if self.a_dtype != self.b_dtype or key not in _MMA:
            raise UnsupportedError(
                f"{what}: mma.sync of {self.a_dtype.name} x {self.b_dtype.name} into "
                f"{self.accum_dtype.name} is not supported", where,
                hint="float16/bfloat16 into float32, or int8/uint8 into int32")
        if num_elems_per_byte != 1:
            raise UnsupportedError(f"{what}: num_elems_per_byte={num_elems_per_byte!r} (packed B "
                                   "operands, decoded in registers) is not supported", where,
                                   hint="decode B into a T.alloc_local of the mma dtype and use "
                                        "num_elems_per_byte=1")
        if not isinstance(reduce_k, int) or isinstance(reduce_k, bool) or reduce_k < 1:
            raise KernelTypeError(f"{what}: reduce_k must be a positive int, got {reduce_k!r}", where)
        self.mma_name = _MMA[key]
        self.micro_size_x, self.micro_size_y, self.micro_size_k = micro_size(self.a_dtype)
        for name, v, step in (("warp_row_tiles", warp_row_tiles, self.micro_size_x),
                              ("warp_col_tiles", warp_col_tiles, self.micro_size_y),
                              ("chunk", chunk, self.micro_size_k)):
            if not isinstance(v, int) or v <= 0 or v % step:
                raise KernelTypeError(f"{what}: {name} must be a positive multiple of {step}, got {v!r}",
                                      where)
        self.a_transposed, self.b_transposed = bool(a_transposed), bool(b_transposed)
        self.block_row_warps, self.block_col_warps = block_row_warps, block_col_warps
        self.warp_row_tiles, self.warp_col_tiles = warp_row_tiles, warp_col_tiles
        self.chunk, self.reduce_k, self.is_m_first = chunk, reduce_k, bool(is_m_first)
        self.warp_rows = warp_row_tiles // self.micro_size_x
        self.warp_cols = warp_col_tiles // self.micro_size_y
        self.local_size_a = self.micro_size_x * self.micro_size_k // WARP
        self.local_size_b = self.micro_size_y * self.micro_size_k // WARP
        self.local_size_out = self.micro_size_x * self.micro_size_y // WARP
        # with reduce_k > 1 the block has reduce_k groups of these warps (T.Kernel(threads=(n,
        # reduce_k)): group rk = T.get_thread_binding(1) takes K from rk * chunk
        self.threads = WARP * block_row_warps * block_col_warps * reduce_k
        self.thread_var = thread_var

    # -- thread binding ---------------------------------------------------------------------------
    def get_thread_binding(self) -> E.Expr:
        """The thread index the emitted code uses (``T.get_thread_binding()`` unless given)."""
        return E.as_expr(self.thread_var) if self.thread_var is not None else P.get_thread_binding()

    def extract_thread_binding(self, thread_id: Any, is_m_first: Optional[bool] = None
                               ) -> tuple[E.Expr, E.Expr, E.Expr]:
        """``(lane, warp_n, warp_m)`` of thread ``thread_id``: with ``is_m_first`` (the
        emitter's unless given) consecutive warps step along N (``warp_n = warp %
        block_col_warps``), else along M (``warp_m = warp % block_row_warps``), as TileLang."""
        t = E.as_expr(thread_id)
        warp = t // WARP
        m_first = self.is_m_first if is_m_first is None else bool(is_m_first)
        if m_first:
            return t % WARP, warp % self.block_col_warps, (warp // self.block_col_warps) % self.block_row_warps
        return t % WARP, (warp // self.block_row_warps) % self.block_col_warps, warp % self.block_row_warps

    # -- the emitted operations ------------------------------------------------------------------
    def ldmatrix_a(self, A_local_buf: Any, A_shared_buf: Any, ki: Any, rk: Any = 0) -> None:
        """Load the A fragments of k-step ``ki`` of the warp's rows from shared memory."""
        what = "TensorCoreIntrinEmitter.ldmatrix_a"
        a_loc = _buffer(A_local_buf, what, ("local",), "the A registers")
        a_sh = _buffer(A_shared_buf, what, ("shared",), "the A tile")
        _need_size(a_loc, self.warp_rows * self.local_size_a, what)
        lane, _, warp_m = self.extract_thread_binding(self.get_thread_binding())
        kstep = self.micro_size_k
        k0 = E.as_expr(rk) * self.chunk + E.as_expr(ki) * kstep
        if self.a_dtype.bits == 8 and self.a_transposed:  # ldmatrix cannot transpose bytes
            for i in range(self.warp_rows):
                m0 = warp_m * self.warp_row_tiles + i * self.micro_size_x
                _lane_loads(a_loc, i * self.local_size_a, self.local_size_a, lambda r, q: a_sh[
                    k0 + (r // 2) * 16 + (lane % 4) * 4 + q, m0 + lane // 4 + (r % 2) * 8])
            return
        dm, dk = a_lane_offsets(lane, kstep, self.a_transposed)
        for i in range(self.warp_rows):
            m = warp_m * self.warp_row_tiles + i * self.micro_size_x + dm
            src = a_sh[(k0 + dk, m) if self.a_transposed else (m, k0 + dk)]
            dst = a_loc[i * self.local_size_a]
            _emit_call("tl::ldmatrix", _addr(dst), _addr(src),
                       template=(4, "true" if self.a_transposed else "false"))

    def ldmatrix_b(self, B_local_buf: Any, B_shared_buf: Any, ki: Any, rk: Any = 0) -> None:
        """Load the B fragments of k-step ``ki`` of the warp's columns from shared memory."""
        what = "TensorCoreIntrinEmitter.ldmatrix_b"
        b_loc = _buffer(B_local_buf, what, ("local",), "the B registers")
        b_sh = _buffer(B_shared_buf, what, ("shared",), "the B tile")
        _need_size(b_loc, self.warp_cols * self.local_size_b, what)
        lane, warp_n, _ = self.extract_thread_binding(self.get_thread_binding())
        kstep = self.micro_size_k
        k0 = E.as_expr(rk) * self.chunk + E.as_expr(ki) * kstep
        if self.b_dtype.bits == 8 and not self.b_transposed:  # ldmatrix cannot transpose bytes
            for j in range(self.warp_cols):
                n0 = warp_n * self.warp_col_tiles + j * self.micro_size_y
                _lane_loads(b_loc, j * self.local_size_b, self.local_size_b, lambda r, q: b_sh[
                    k0 + (r % 2) * 16 + (lane % 4) * 4 + q, n0 + lane // 4 + (r // 2) * 8])
            return
        dk, dn = b_lane_offsets(lane, kstep, self.b_transposed)
        for j in range(self.warp_cols):
            n = warp_n * self.warp_col_tiles + j * self.micro_size_y + dn
            src = b_sh[(n, k0 + dk) if self.b_transposed else (k0 + dk, n)]
            dst = b_loc[j * self.local_size_b]
            _emit_call("tl::ldmatrix", _addr(dst), _addr(src),
                       template=(4, "false" if self.b_transposed else "true"))

    def mma(self, A_local_buf: Any, B_local_buf: Any, C_local_buf: Any, k_inner: Any = 0) -> None:
        """``C += A @ B`` on the warp's registers: two m16n8 ``mma.sync`` per 16x16 tile."""
        what = "TensorCoreIntrinEmitter.mma"
        a = _buffer(A_local_buf, what, ("local",), "the A registers")
        b = _buffer(B_local_buf, what, ("local",), "the B registers")
        c = _buffer(C_local_buf, what, ("local",), "the accumulator registers")
        _need_size(c, self.warp_rows * self.warp_cols * self.local_size_out, what)
        if isinstance(k_inner, int):  # registers read: k-step k_inner's A and B fragments
            _need_size(a, (k_inner + 1) * self.warp_rows * self.local_size_a, what)
            _need_size(b, (k_inner + 1) * self.warp_cols * self.local_size_b, what)
        for buf, want in ((a, self.a_dtype), (b, self.b_dtype), (c, self.accum_dtype)):
            if buf.dtype != want:
                raise KernelTypeError(f"{what}: '{buf.name}' is {buf.dtype.name}, the emitter was "
                                      f"made for {want.name}")
        ka = E.as_expr(k_inner) * (self.warp_rows * self.local_size_a)
        kb = E.as_expr(k_inner) * (self.warp_cols * self.local_size_b)
        half_b, half_c = self.local_size_b // 2, self.local_size_out // 2
        for i in range(self.warp_rows):
            for j in range(self.warp_cols):
                for h in range(2):
                    cptr = _addr(c[(i * self.warp_cols + j) * self.local_size_out + h * half_c])
                    aptr = _addr(a[ka + i * self.local_size_a], "unsigned")
                    bptr = _addr(b[kb + j * self.local_size_b + h * half_b], "unsigned")
                    _emit_call(self.mma_name, cptr, aptr, bptr)

    def stmatrix(self, C_local_buf: Any, C_buf: Any, pid_m: Any = None, pid_n: Any = None) -> None:
        """Store the accumulator registers: into ``C_buf[tile_m, tile_n, 16, 16]`` (a 4-d buffer
        of 16x16 tiles) or a 2-d ``C_buf`` (offset by block ``pid_m``, ``pid_n`` when given)."""
        what = "TensorCoreIntrinEmitter.stmatrix"
        c = _buffer(C_local_buf, what, ("local",), "the accumulator registers")
        out = _buffer(C_buf, what, ("shared", "global"), "the destination")
        if out.ndim not in (2, 4):
            raise KernelTypeError(f"{what}: the destination must be 2-d or 4-d (tiles of 16x16), "
                                  f"got '{out.name}' of shape {list(out.shape)}")
        lane, warp_n, warp_m = self.extract_thread_binding(self.get_thread_binding())
        b = current(what)
        i, j, e = E.Var(b.take_name("i")), E.Var(b.take_name("j")), E.Var(b.take_name("e"))
        row, col = c_coords(lane, e)
        ti = warp_m * self.warp_rows + i
        tj = warp_n * self.warp_cols + j
        if out.ndim == 4:
            idx: tuple = (ti, tj, row, col)
        else:
            bm = self.block_row_warps * self.warp_row_tiles
            bn = self.block_col_warps * self.warp_col_tiles
            r0 = ti * self.micro_size_x + (E.as_expr(pid_m) * bm if pid_m is not None else 0)
            c0 = tj * self.micro_size_y + (E.as_expr(pid_n) * bn if pid_n is not None else 0)
            idx = (r0 + row, c0 + col)
        reg = c[(i * self.warp_cols + j) * self.local_size_out + e]
        body = BufferStore(out, idx, E.cast(out.dtype, reg))
        for v, n in ((e, self.local_size_out), (j, self.warp_cols), (i, self.warp_rows)):
            body = For(v, E.const(0), n, body, "unroll")
        b.emit(body)
