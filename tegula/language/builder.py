"""The IR builder the frontend drives while it walks a kernel function.

The parser opens frames (function, kernel, loop bodies, branches); ``T.*`` primitives append
statements to the innermost frame through :func:`current`. Primitives called with no builder
active (outside a kernel function) raise a clear error instead of building anything.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional

from tegula.errors import KernelSyntaxError
from tegula.ir.buffer import Buffer
from tegula.ir.expr import Var
from tegula.ir.span import Span
from tegula.ir.stmt import Stmt


# KernelFrame.annotations key a dialect sets when its kernels are not CUDA-style (the Ascend 950
# dialect of tegula.language.ascend), so the parser loads that dialect only when a kernel used it.
DIALECT = "dialect"


@dataclass
class KernelFrame:
    """What a ``with T.Kernel(...)`` block collects besides its statements."""

    allocs: list[Buffer] = field(default_factory=list)
    alloc_inits: dict = field(default_factory=dict)
    annotations: dict = field(default_factory=dict)
    names: set = field(default_factory=set)
    threads: tuple = (128,)
    safe_values: dict = field(default_factory=dict)  # T.annotate_safe_value: buffer -> value
    thread_var: Optional[Var] = None  # the thread index, once T.get_thread_binding asked for it
    block_vars: tuple = ()  # blockIdx.x, .y, .z as bound by the `with T.Kernel(...) as ...`
    grid: tuple = ()  # the grid's extents (ints or expressions), as T.Kernel gave them
    attr_scopes: list = field(default_factory=list)  # the `with T.attr(...)` blocks open here
    reducers: dict = field(default_factory=dict)  # T.alloc_reducer tiles -> op


class Builder:
    """Statement lists under construction, plus the state of the function being built."""

    def __init__(self, mode: str, consts: Optional[dict] = None):
        self.mode = mode                       # "prim_func" or "eager"
        self.stack: list[list[Stmt]] = [[]]
        self.kernel: Optional[KernelFrame] = None
        self.loop_kinds: list[str] = []         # kinds of the loops enclosing the current point
        self.params: list[Any] = []             # Buffers and Vars, in order of declaration
        self.outputs: list[Buffer] = []          # eager style: T.empty buffers
        self.workspaces: list[Buffer] = []       # T.alloc_global scratch tensors
        self.consts: dict = dict(consts or {})   # eager style: values of T.const symbols
        self.pending: dict[str, Any] = {}        # eager style: actual shapes/dtypes of tensor args
        self.placeholders: list[Any] = []        # eager style: T.const symbols not yet bound
        self.const_names: list[str] = []         # eager style: every name T.const declared
        self.shape_hints: dict[str, int] = {}    # eager style: T.const values read off the tensors
        self._name: Optional[str] = None
        self.param_names: set[str] = set()
        self.macros: list[str] = []              # names of the macros being expanded, outermost first
        self.ranges: dict = {}                   # Var -> inclusive (lo, hi) where known
        self.views: dict = {}                    # view Buffer -> the buffer it views (language/views.py)

    # -- statements -----------------------------------------------------------------------------
    def emit(self, stmt: Stmt) -> None:
        self.stack[-1].append(stmt)

    @contextlib.contextmanager
    def frame(self) -> Iterator[list[Stmt]]:
        """Collect the statements emitted inside into a fresh list (yielded)."""
        self.stack.append([])
        try:
            yield self.stack[-1]
        finally:
            self.stack.pop()

    @contextlib.contextmanager
    def loop(self, kind: str) -> Iterator[None]:
        self.loop_kinds.append(kind)
        try:
            yield
        finally:
            self.loop_kinds.pop()

    @property
    def in_parallel(self) -> bool:
        return "parallel" in self.loop_kinds

    # -- naming of allocations: ``A_shared = T.alloc_shared(...)`` names the buffer A_shared ----
    @contextlib.contextmanager
    def naming(self, name: Optional[str]) -> Iterator[None]:
        old, self._name = self._name, name
        try:
            yield
        finally:
            self._name = old

    def take_name(self, default: str) -> str:
        name, self._name = self._name or default, None
        used = self.kernel.names if self.kernel is not None else self.param_names
        base, k = name, 1
        while name in used:
            name = f"{base}_{k}"
            k += 1
        used.add(name)
        return name

    def require_kernel(self, what: str) -> KernelFrame:
        if self.kernel is None:
            raise KernelSyntaxError(f"{what} can only be used inside `with T.Kernel(...)`")
        return self.kernel


_builders: list[Builder] = []


def current(what: str = "this primitive") -> Builder:
    """The active builder; raises when ``what`` is used outside a kernel function."""
    if not _builders:
        raise KernelSyntaxError(
            f"{what} can only be used inside a kernel function "
            "(decorated with @T.prim_func, @tegula.jit or @T.macro)", caller_span())
    return _builders[-1]


def caller_span() -> Optional[Span]:
    """The user's line calling into tegula right now (the first frame outside tegula's own
    modules), for errors raised where the frontend gives no span: outside any kernel, or in
    parameter annotations, which Python evaluates when the ``def`` runs."""
    import inspect

    frame = inspect.currentframe()
    while frame is not None and (frame.f_globals.get("__name__") or "").startswith("tegula."):
        frame = frame.f_back
    if frame is None or frame.f_code.co_filename.startswith("<"):
        return None
    info = inspect.getframeinfo(frame, context=0)
    pos = getattr(info, "positions", None)
    col = pos.col_offset if pos is not None and pos.col_offset is not None else 0
    return Span(frame.f_code.co_filename, info.lineno, col)


def active() -> Optional[Builder]:
    return _builders[-1] if _builders else None


@contextlib.contextmanager
def building(b: Builder) -> Iterator[Builder]:
    _builders.append(b)
    try:
        yield b
    finally:
        _builders.pop()


def new_var(name: str, dtype: Any = None) -> Var:
    from tegula.ir import dtype as dt

    return Var(name, dt.as_dtype(dtype) if dtype is not None else dt.int32)
