"""CUDA C++ code generation from thread-level IR.

``codegen(func, target, pass_configs) -> CudaModule`` turns a lowered ``PrimFunc`` into one
translation unit with one ``extern "C" __global__`` function per ``Kernel``, plus what the
launcher needs to run them (kernel names, grid expressions, block dims, dynamic shared memory
bytes, the parameter list).

Thread-level IR (what the CUDA pipeline hands to codegen)
---------------------------------------------------------
- A ``PrimFunc`` whose params are global ``Buffer``s and scalar ``Var``s; its body is one
  ``Kernel`` or a ``SeqStmt`` of ``Kernel``s, launched in order on one stream. Nothing else at
  the top level.
- Every kernel function takes the same parameters: each buffer param as ``T* __restrict__``
  (``const T*`` when the kernel never writes it nor takes its address), each scalar param by
  value, then each dynamic dimension (``func.dynamic_vars()``) as its integer type.
- ``Kernel``: ``grid`` holds up to 3 ints or expressions over scalar params and dynamic dims
  (evaluated on the host at launch); ``threads`` is blockDim (x, y, z); ``block_vars[i]`` is
  blockIdx.x / y / z; ``thread_var`` (when set) is the flattened thread index
  ``threadIdx.x + threadIdx.y * bdx + threadIdx.z * bdx * bdy``.
  ``annotations["swizzle"] = (panel, order)`` rasterizes a 2-D grid for L2 reuse: from the
  linear block id ``L = blockIdx.x + blockIdx.y * gridDim.x``, ``(bx, by)`` walk strips of
  ``panel`` columns (``"row"``) or rows (``"col"``), the formula of
  :func:`tegula.ir.raster.block_coords` printed as C (the emulator evaluates the same IR).
- ``allocs``: ``"shared"`` / ``"shared.dyn"`` buffers are carved from one ``extern __shared__``
  array, at ``annotations["smem_offsets"][buffer]`` bytes when given, else packed in order at
  128-byte alignment; the total is ``KernelInfo.smem_bytes``. ``"local"`` buffers are per-thread
  arrays ``T name[numel]``; ``"local.var"`` buffers are scalars ``T name = init`` (init from
  ``alloc_inits``, else 0). ``"local.fragment"`` must have been lowered away.
- Statements: ``SeqStmt``; ``For`` of kind ``"serial"`` (plain loop) or ``"unroll"`` /
  ``"vectorized"`` (``#pragma unroll``), with ``start``, ``extent`` (maybe an expression) and
  ``step``; ``While``; ``Break``; ``Continue``; ``IfThenElse``; ``BufferStore`` (indices flattened
  row-major over the buffer's shape, dynamic dims included, or over its ``strides``);
  ``LetStmt`` (``const T name = value;`` visible to the rest of the enclosing sequence; the
  let of a ``T.make_tensor`` address, an ``AddressVar``, is ``T* const buf = (T*)(value);``);
  ``AttrStmt`` (its body, in place; ``tile_op`` attributes leave a ``// T.copy`` note); and
  ``Evaluate(Builtin)`` for effects. Tile operations must have been lowered.
- Expressions: everything in :mod:`tegula.ir.expr`, spelled by
  :mod:`tegula.backends.cuda.codegen_expr`: integer ``//`` and ``%`` round toward -inf
  (``tl::floordiv`` / ``tl::floormod``, or a shift / mask for a power-of-two divisor), ``div``
  on ints truncates; math intrinsics use the float or double C function (``expf`` vs ``exp``),
  half / bfloat16 / fp8 compute in float; pass config ``tl.enable_fast_math`` picks the
  ``__expf``-style intrinsics. Signed arithmetic that may overflow wraps (computed through
  the unsigned type; index arithmetic excepted), for which the emitter records the ranges of the
  thread and block indices, loop variables, lets and dimensions. ``Builtin`` names:

  ============== ===========================================================================
  thread_idx     the flattened thread index
  sync_threads   ``__syncthreads()``  (``sync_warp``: ``__syncwarp()``)
  address_of     ``&buf[flat]`` of its one BufferLoad argument (attrs ``ctype``: cast to ``ctype*``)
  reinterpret    ``*reinterpret_cast<ctype*>(&buf[flat])``, attrs ``ctype``: an lvalue
  assign         ``lhs = rhs`` (lhs a load or a reinterpret): vector stores
  shfl_xor       (value, mask[, width]) -> ``tl::shfl_xor`` / ``tl::shfl_xor_width``
  shfl_idx, shfl_down, shfl_up  (value, lane or delta, width) -> ``tl::shfl_idx`` ... (``__shfl_*_sync``)
  printf         attrs ``fmt``; the args follow
  call_extern    ``callee(args)`` (attrs ``callee``): a function of the kernels' ``T.import_source``
                 text (``annotations["import_source"]``), which the module holds before the kernels
  ``a::b``       a call of that C++ function, attrs ``template`` = (args...) -> ``a::b<...>(...)``
  ============== ===========================================================================

Readability: before the code of each kernel source line, a comment ``// file.py:LINE  <line>``
(taken from node spans) appears once per change of line.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from tegula.ir.annotations import CLUSTER, TMA_MAPS
from tegula.errors import ResourceError, UnsupportedError, VerifyError
from tegula.ir import dtype as dt
from tegula.ir import expr as E
from tegula.ir import stmt as S
from tegula.ir.buffer import Buffer
from tegula.ir.expr import Var
from tegula.ir.raster import block_coords, strips
from tegula.ir.visitor import post_order_visit
from tegula.backends.cuda.machine import MAX_THREADS_PER_BLOCK
from tegula.backends.cuda.codegen_expr import COND, REL, ExprPrinter, Names, literal
from tegula.backends.cuda.passes.plan_shared_memory import smem_layout

INDENT = "  "
SMEM_NAME = "tl_smem"


@dataclass(frozen=True)
class ParamInfo:
    """One kernel parameter: a buffer pointer, a scalar, or a dynamic dimension.

    ``source`` is the PrimFunc parameter position (buffers, scalars), or for a dimension the
    (parameter position, axis) of the first buffer whose shape holds it.
    """

    name: str            # C name
    kind: str            # "buffer", "scalar", "dim" or "tmap" (a TMA tensor map, 128 bytes)
    dtype: dt.DType      # element type (buffers) or value type
    source: Any
    var: Optional[Var] = None  # the IR variable (scalars and dims)


@dataclass(frozen=True)
class KernelInfo:
    name: str
    grid: tuple          # 3 dims: ints or expressions over scalar params / dynamic dims
    block: tuple[int, int, int]
    smem_bytes: int


@dataclass
class CudaModule:
    """Generated source with what is needed to launch it."""

    source: str
    kernels: list[KernelInfo]
    params: list[ParamInfo]
    headers: list[str] = field(default_factory=list)

    @property
    def kernel_names(self) -> list[str]:
        return [k.name for k in self.kernels]


# ---------------------------------------------------------------------------------------------
# Headers: which of include/tegula/*.h defines each tl:: name
# ---------------------------------------------------------------------------------------------

_HEADER_DIR = Path(__file__).resolve().parent / "include" / "tegula"
_DEF_RE = re.compile(r"(?:TL_DEVICE|TL_HOST_DEVICE|struct|enum class)\s+(?:[\w:<>,\s\*&]*?\s)?\**(\w+)\s*[({]")
_MACRO_DEF_RE = re.compile(r"^TL_\w+\((\w+),", re.M)  # TL_UNARY_MATH(exp, ...)
_header_of: Optional[dict[str, str]] = None


def _header_map() -> dict[str, str]:
    global _header_of
    if _header_of is None:
        found: dict[str, str] = {}
        for h in ("common.h", "copy.h", "ldmatrix.h", "mma.h", "reduce.h", "print.h", "barrier.h",
                  "tma.h", "wgmma.h", "wgmma_ops.h"):
            path = _HEADER_DIR / h
            if path.is_file():
                text = path.read_text()
                for m in list(_DEF_RE.finditer(text)) + list(_MACRO_DEF_RE.finditer(text)):
                    found.setdefault(m.group(1), "wgmma.h" if h == "wgmma_ops.h" else h)
        _header_of = found
    return _header_of


def _headers_for(body: str) -> list[str]:
    hmap = _header_map()
    wanted = {"common.h"}
    for name in set(re.findall(r"\btl::(\w+)", body)):
        wanted.add(hmap.get(name, "tegula.h"))
    if re.search(r"\bprintf\(", body):
        wanted.add("print.h")
    order = ["common.h", "copy.h", "ldmatrix.h", "mma.h", "reduce.h", "print.h", "barrier.h",
             "tma.h", "wgmma.h", "tegula.h"]
    return [h for h in order if h in wanted]


# ---------------------------------------------------------------------------------------------
# Statements
# ---------------------------------------------------------------------------------------------

class _Emitter:
    """Writes the body of one kernel function, line by line."""

    def __init__(self, p: ExprPrinter):
        self.p = p
        self.lines: list[str] = []
        self.depth = 1
        self.last_src: Optional[tuple[str, int]] = None

    def line(self, text: str) -> None:
        self.lines.append(INDENT * self.depth + text)

    def source_comment(self, node: Any) -> None:
        span = getattr(node, "span", None)
        if span is None or not getattr(span, "file", None):
            return
        key = (span.file, span.line)
        if key == self.last_src:
            return
        self.last_src = key
        src = span.source_line().strip()
        self.line(f"// {span.short()}  {src}".rstrip())

    def block(self, body: S.Stmt) -> None:
        self.depth += 1
        self.stmt(body)
        self.depth -= 1

    def stmt(self, s: S.Stmt) -> None:
        if isinstance(s, S.SeqStmt):
            for c in s.stmts:
                self.stmt(c)
            return
        rule = _STMT_RULES.get(type(s))
        if rule is None:
            if isinstance(s, S.TileOp):
                raise UnsupportedError(f"tile operation {type(s).__name__} reached codegen: it must be "
                                       "lowered by the CUDA pipeline first", span=s.span)
            raise UnsupportedError(f"unimplemented statement {type(s).__name__} for target cuda", span=s.span)
        self.source_comment(s)
        rule(self, s)


def _for(em: _Emitter, s: S.For) -> None:
    p = em.p
    if s.kind not in ("serial", "unroll", "vectorized"):
        raise UnsupportedError(f"a '{s.kind}' loop reached codegen: the CUDA pipeline must lower it "
                               "to serial, unrolled or vectorized loops", span=s.span)
    if s.kind in ("unroll", "vectorized"):
        em.line("#pragma unroll")
    v = em.p.names.bind(s.var)
    ctype = s.var.dtype.ctype
    start = E.cast(s.var.dtype, E.as_expr(s.start))
    step = int(s.step)
    extent = E.cast(s.var.dtype, E.as_expr(s.extent))
    stop = extent if (isinstance(start, E.Const) and start.value == 0 and step == 1) else \
        E.binary("add", start, extent if step == 1 else E.binary("mul", extent, step))
    _loop_range(p, s.var, start, extent, step)
    inc = f"++{v}" if step == 1 else (f"{v} += {step}" if step > 0 else f"{v} -= {-step}")
    cmp = "<" if step > 0 else ">"
    first = p.index(start, COND)  # trip counts over indices are index arithmetic
    if _has_load(stop):  # the trip count is fixed when the loop starts
        end = em.p.names.fresh(f"{v}_end")
        head = f"{ctype} {v} = {first}, {end} = {p.index(stop, COND)}; {v} {cmp} {end}; {inc}"
    else:
        head = f"{ctype} {v} = {first}; {v} {cmp} {p.index(stop, REL, True)}; {inc}"
    em.line(f"for ({head}) {{")
    em.block(s.body)
    em.line("}")


def _loop_range(p: ExprPrinter, var: Var, start: E.Expr, extent: E.Expr, step: int) -> None:
    """The values ``var`` takes, for the wrapping decisions of the printer: from the start up to
    the last value before the stop, or up to the type's maximum less one when the stop is unknown
    (``var < stop`` holds inside the loop)."""
    p.ranges.pop(var, None)
    lo, ext = p.range_of(start), p.range_of(extent)
    if lo is None or step <= 0:
        return
    most = 2 ** (var.dtype.bits - (var.dtype.kind == "int")) - 1
    hi = lo[1] + (ext[1] - 1) * step if ext is not None else most - 1
    p.ranges[var] = (lo[0], max(lo[0], hi))


def _has_load(e: E.Expr) -> bool:
    found = []
    post_order_visit(e, lambda n: found.append(n) if isinstance(n, (E.BufferLoad, E.Builtin)) else None)
    return bool(found)


def _while(em: _Emitter, s: S.While) -> None:
    em.line(f"while ({em.p(s.cond)}) {{")
    em.block(s.body)
    em.line("}")


def _if(em: _Emitter, s: S.IfThenElse) -> None:
    em.line(f"if ({em.p(s.cond)}) {{")
    em.block(s.then)
    else_ = s.else_
    while isinstance(else_, S.IfThenElse):
        em.line(f"}} else if ({em.p(else_.cond)}) {{")
        em.block(else_.then)
        else_ = else_.else_
    if else_ is not None:
        em.line("} else {")
        em.block(else_)
    em.line("}")


def _store(em: _Emitter, s: S.BufferStore) -> None:
    p = em.p
    lhs, _ = p.element(s.buffer, s.indices)
    value = E.cast(s.buffer.dtype, E.as_expr(s.value, like=s.buffer.dtype))
    em.line(f"{lhs} = {p(value)};")


def _let(em: _Emitter, s: S.LetStmt) -> None:
    value = em.p(s.value)  # before binding: the value may mention an earlier binding of the var
    buf = getattr(s.var, "buffer", None)
    if buf is not None:  # T.make_tensor: the buffer is a typed pointer to the address
        name = em.p.names.bind(buf)
        em.p.names.of[id(s.var)] = name
        em.line(f"{buf.dtype.ctype}* const {name} = ({buf.dtype.ctype}*)({value});")
        return
    r = em.p.range_of(s.value) if s.var.dtype.is_int else None
    if s.var.dtype.is_int and not em.p.index_like(s.value):
        em.p.data_vars.add(s.var)
    else:
        em.p.data_vars.discard(s.var)
    if r is None:
        em.p.ranges.pop(s.var, None)
    else:
        em.p.ranges[s.var] = r
    name = em.p.names.bind(s.var)
    em.line(f"const {s.var.dtype.ctype} {name} = {value};")


def _evaluate(em: _Emitter, s: S.Evaluate) -> None:
    text = em.p(s.value)
    em.line(f"{text};" if isinstance(s.value, E.Builtin) else f"(void)({text});")


def _attr(em: _Emitter, s: S.AttrStmt) -> None:
    """Attributes only guide passes; the body is emitted in place, after a note for the reader."""
    if s.key == "tile_op":
        em.line(f"// {s.value}")
    em.stmt(s.body)


def _kernel_in_kernel(em: _Emitter, s: S.Kernel) -> None:
    raise VerifyError("a Kernel nested inside another Kernel", span=s.span)


_STMT_RULES: dict[type, Any] = {
    S.For: _for, S.While: _while, S.IfThenElse: _if, S.BufferStore: _store, S.LetStmt: _let,
    S.Evaluate: _evaluate, S.Kernel: _kernel_in_kernel, S.AttrStmt: _attr,
    S.Break: lambda em, s: em.line("break;"),
    S.Continue: lambda em, s: em.line("continue;"),
}


# ---------------------------------------------------------------------------------------------
# Kernels
# ---------------------------------------------------------------------------------------------

def _kernels_of(func: S.PrimFunc) -> list[S.Kernel]:
    body = func.body
    stmts = body.stmts if isinstance(body, S.SeqStmt) else (body,)
    out = []
    for s in stmts:
        if not isinstance(s, S.Kernel):
            raise UnsupportedError(f"codegen expects only Kernel launches at the top level of "
                                   f"'{func.name}', found {type(s).__name__}", span=s.span)
        out.append(s)
    if not out:
        raise UnsupportedError(f"'{func.name}' launches no kernel")
    return out


def _written_buffers(func: S.PrimFunc) -> set[int]:
    """ids of global buffers stored to, or whose address is taken (not candidates for const)."""
    written: set[int] = set()

    def visit(n: Any) -> None:
        if isinstance(n, S.BufferStore):
            written.add(id(n.buffer))
        elif isinstance(n, E.Builtin) and n.name in ("address_of", "assign"):
            for a in n.args[:1]:
                if isinstance(a, E.BufferLoad):
                    written.add(id(a.buffer))
                elif isinstance(a, E.Builtin):
                    for b in a.args[:1]:
                        if isinstance(b, E.BufferLoad):
                            written.add(id(b.buffer))
    post_order_visit(func.body, visit)
    return written


def _params(func: S.PrimFunc) -> list[ParamInfo]:
    names = Names()
    params: list[ParamInfo] = []
    for i, p in enumerate(func.params):
        if isinstance(p, Buffer):
            params.append(ParamInfo(names.fresh(p.name), "buffer", p.dtype, i))
        else:
            params.append(ParamInfo(names.fresh(p.name), "scalar", p.dtype, i, p))
    scalars = {id(p) for p in func.params if isinstance(p, Var)}
    for v in func.dynamic_vars():
        if id(v) in scalars:
            continue
        src = next((i, k) for i, p in enumerate(func.params) if isinstance(p, Buffer)
                   for k, d in enumerate(p.shape) if d is v)
        params.append(ParamInfo(names.fresh(v.name), "dim", v.dtype, src, v))
    return params


def _tma_params(func: S.PrimFunc, kernels: list) -> list[ParamInfo]:
    """One parameter per tensor map of the kernels (``annotations["tma_maps"]``): source is
    (the buffer's parameter position, the map)."""
    out = []
    for k in kernels:
        for m in TMA_MAPS.get(k.annotations) or ():
            pos = next(i for i, p in enumerate(func.params) if p is m.buffer)
            out.append(ParamInfo(m.var.name, "tmap", m.buffer.dtype, (pos, m), m.var))
    return out


def _raster_lines(raster: tuple[int, str], k: S.Kernel, p: ExprPrinter, names: Names) -> list[str]:
    """The block indices x and y of a rasterized grid (:func:`tegula.ir.raster.block_coords`)
    as C; a third grid dimension keeps ``blockIdx.z`` (each z-slice is rasterized alike)."""
    panel, order = raster
    lid, gx, gy = Var("tl_block_id"), Var("gx"), Var("gy")
    names.of[id(lid)] = names.fresh("tl_block_id", internal=True)
    names.of[id(gx)], names.of[id(gy)] = "(int)gridDim.x", "(int)gridDim.y"
    (_, hx), (_, hy) = (p.range_of(g) or (1, most) for g, most in zip(k.grid[:2], _MAX_GRID))
    p.ranges.update({gx: (1, hx), gy: (1, hy), lid: (0, hx * hy - 1)})
    lines = [f"// block rasterization: strips of {panel} {'columns' if order == 'row' else 'rows'}, "
             f"walked {'row' if order == 'row' else 'column'} by {'row' if order == 'row' else 'column'}",
             f"const int {names[lid]} = blockIdx.x + blockIdx.y * gridDim.x;"]

    def let(name: str, value: E.Expr) -> E.Expr:
        v = Var(f"tl_{name}")
        names.of[id(v)] = names.fresh(f"tl_{name}", internal=True)
        lines.append(f"const int {names[v]} = {p(value)};")
        p.ranges[v] = p.range_of(value)
        return v

    for v, e in zip(k.block_vars[:2], block_coords(lid, gx, gy, raster, let)):
        lines.append(f"const {v.dtype.ctype} {names[v]} = {p(e)};")
    return lines


_MAX_GRID = (2**31 - 1, 65535, 65535)  # the largest grid CUDA launches, per dimension


def _emit_kernel(func: S.PrimFunc, k: S.Kernel, kname: str, params: list[ParamInfo],
                 const_ids: set[int], fast_math: bool, index64: bool,
                 min_blocks: int = 0) -> tuple[str, KernelInfo]:
    names = Names()
    decls = []
    const_buffers = []
    for info in params:
        names.used.add(info.name)
        if info.kind == "buffer":
            buf = func.params[info.source]
            names.of[id(buf)] = info.name
            const = id(buf) in const_ids
            if const:
                const_buffers.append(buf)
            decls.append(f"{'const ' if const else ''}{info.dtype.ctype}* __restrict__ {info.name}")
        elif info.kind == "tmap":
            names.of[id(info.var)] = info.name
            decls.append(f"const __grid_constant__ tl::TensorMap {info.name}")
        else:
            names.of[id(info.var)] = info.name
            decls.append(f"{info.dtype.ctype} {info.name}")

    if len(k.threads) > 3 or len(k.grid) > 3 or len(k.block_vars) > 3:
        raise UnsupportedError("a kernel has at most 3 grid and 3 thread dimensions", span=k.span)
    block = tuple(int(t) for t in k.threads) + (1,) * (3 - len(k.threads))
    nthreads = block[0] * block[1] * block[2]
    if nthreads > MAX_THREADS_PER_BLOCK or nthreads < 1:
        raise ResourceError(f"a CUDA block has 1 to {MAX_THREADS_PER_BLOCK} threads, this kernel asks for "
                            f"{nthreads}", span=k.span)
    grid = tuple(k.grid) + (1,) * (3 - len(k.grid))

    head: list[str] = []
    offsets, smem_bytes = smem_layout(k)
    if offsets:
        head.append(f"extern __shared__ __align__(1024) unsigned char {SMEM_NAME}[];")
    # thread index
    if block[1] == 1 and block[2] == 1:
        tid_text = "threadIdx.x"
    elif block[2] == 1:
        tid_text = f"(threadIdx.x + threadIdx.y * {block[0]})"
    else:
        tid_text = f"(threadIdx.x + threadIdx.y * {block[0]} + threadIdx.z * {block[0] * block[1]})"
    if k.thread_var is not None:
        tname = names.bind(k.thread_var)
        head.append(f"const {k.thread_var.dtype.ctype} {tname} = {tid_text};")
        tid_text = tname
    # block indices
    bnames = [names.bind(v) for v in k.block_vars]
    p = ExprPrinter(names, thread_idx=tid_text, fast_math=fast_math,
                    const_buffers=frozenset(const_buffers), index64=index64,
                    thread_range=(0, nthreads - 1))
    raster = strips(k.annotations) if len(bnames) >= 2 else None
    if raster:
        head.extend(_raster_lines(raster, k, p, names))
    for v, name, axis in list(zip(k.block_vars, bnames, "xyz"))[2 if raster else 0:]:
        head.append(f"const {v.dtype.ctype} {name} = blockIdx.{axis};")
    # allocations
    for info in params:  # a dimension is a tensor's size: not negative
        if info.kind == "dim":
            p.ranges[info.var] = (0, 2 ** (info.dtype.bits - 1) - 1)
    if k.thread_var is not None:
        p.ranges[k.thread_var] = (0, nthreads - 1)
    for v, g, most in zip(k.block_vars, grid, _MAX_GRID):
        r = p.range_of(g)
        p.ranges[v] = (0, max(0, min(most, r[1]) - 1 if r is not None else most - 1))
    for b in k.allocs:
        name = names.bind(b)
        ctype = b.dtype.ctype
        if b.is_shared:
            head.append(f"{ctype}* {name} = reinterpret_cast<{ctype}*>({SMEM_NAME} + {offsets[id(b)]});")
        elif b.scope == "local":
            n = b.numel()
            if not isinstance(n, int):
                raise UnsupportedError(f"local buffer '{b.name}' has a dynamic shape {b.shape}", span=b.span)
            nbytes = n * b.dtype.itemsize
            a = 16
            while a > 1 and nbytes % a:  # vector accesses of the array need its alignment
                a //= 2
            align = f"__align__({a}) " if a > b.dtype.itemsize else ""
            head.append(f"{align}{ctype} {name}[{n}];")
        elif b.is_var:
            init = k.alloc_inits.get(b, 0)
            value = E.cast(b.dtype, E.as_expr(init, like=b.dtype))
            head.append(f"{ctype} {name} = {p(value)};")
        else:
            raise UnsupportedError(f"buffer '{b.name}' of scope '{b.scope}' cannot be allocated in a "
                                   "kernel by codegen (fragments must be lowered first)", span=b.span)

    em = _Emitter(p)
    em.source_comment(k)
    for h in head:
        em.line(h)
    em.stmt(k.body)
    bounds = f"{nthreads}, {min_blocks}" if min_blocks > 0 else f"{nthreads}"
    cluster = CLUSTER.get(k.annotations)  # launched in thread block clusters (tma_multicast.py)
    dims = f"__cluster_dims__({', '.join(str(int(c)) for c in (*cluster, 1, 1)[:3])}) " if cluster else ""
    sig = f'extern "C" __global__ void {dims}__launch_bounds__({bounds}) {kname}(' + ", ".join(decls) + ")"
    text = "\n".join([sig + " {", *em.lines, "}"])
    return text, KernelInfo(kname, grid, block, smem_bytes)  # type: ignore[arg-type]


def codegen(func: S.PrimFunc, target: Any = None, pass_configs: Optional[dict] = None) -> CudaModule:
    """CUDA C++ for a thread-level ``func`` (see the module docstring for what it must hold).

    Returns a :class:`CudaModule`. Raises UnsupportedError for IR that is not thread-level (tile
    operations, fragments, parallel loops, unknown builtins), ResourceError for a block of more
    than 1024 threads, VerifyError for a variable used where it is not defined.
    """
    cfg = pass_configs or {}
    fast_math = bool(cfg.get("tl.enable_fast_math", False)) and not cfg.get("tl.disable_fast_math", False)
    index64 = int(cfg.get("tl.config_index_bitwidth", 32) or 32) >= 64
    kernels = _kernels_of(func)
    params = _params(func) + _tma_params(func, kernels)
    written = _written_buffers(func)
    const_ids = {id(b) for b in func.buffer_params() if id(b) not in written}
    texts, infos = [], []
    base = re.sub(r"\W", "_", func.name) or "kernel"
    base = "_" + base if base[0].isdigit() else base
    for i, k in enumerate(kernels):
        kname = f"{base}_kernel" if len(kernels) == 1 else f"{base}_kernel_{i}"
        text, info = _emit_kernel(func, k, kname, params, const_ids, fast_math, index64,
                                  int(k.annotations.get("min_blocks_per_sm")
                                      or cfg.get("tegula.min_blocks_per_sm", 0) or 0))
        texts.append(text)
        infos.append(info)
    body = "\n\n".join(texts)
    headers = _headers_for(body)
    target_text = f" for {target}" if target is not None else ""
    top = [f"// Generated by tegula from '{func.name}'{target_text}."]
    top += [f'#include "tegula/{h}"' for h in headers]
    imported: list[str] = []  # T.import_source: the user's C++, once each, before the kernels
    for k in kernels:
        imported += [s for s in k.annotations.get("import_source", ()) if s not in imported]
    source = "\n".join(top) + "\n\n" + "".join(s.strip("\n") + "\n\n" for s in imported) + body + "\n"
    return CudaModule(source, infos, params, headers)


__all__ = ["codegen", "CudaModule", "KernelInfo", "ParamInfo", "literal"]
