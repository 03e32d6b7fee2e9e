"""``tilelang.tools.Analyzer``: the roofline of a kernel from its tile-level IR, without running it.

    result = Analyzer.analysis(func, CUDA("H200"))      # a PrimFunc, JITKernel or {"main": f}
    result.total_flops, result.total_global_bytes, result.arithmetic_intensity
    result.bound, result.estimated_time                 # "compute" or "memory"; seconds

What is counted, over every block of the grid and every trip of the enclosing loops:

- FLOPs: ``2 * M * N * K`` per ``T.gemm`` (the tensor-core work; element-wise arithmetic is not
  counted);
- global bytes: every tile that a tile operation (``T.copy``, reductions, atomics...) reads from or
  writes to a global buffer, at its tile size, and every element load or store of a global
  buffer in scalar code and ``T.Parallel`` loops. Caches are not modelled: a tile read by two
  blocks counts twice, as DRAM traffic would without L2 reuse;
- ``estimated_time = max(FLOPs / peak, bytes / bandwidth)`` with the GPU's published peak for the
  gemm's input dtype and its DRAM bandwidth (:mod:`tegula.compat.gpus`); ``bound`` says which term
  wins. Loops with a dynamic extent take it from ``dynamic={"name": value}``; a branch counts as
  taken (an upper bound); a ``while`` loop counts once.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional

from tegula.errors import ArgumentError
from tegula.ir import stmt as S
from tegula.ir.buffer import BufferRegion
from tegula.ir.expr import BufferLoad, Expr, Var
from tegula.ir.visitor import post_order_visit


@dataclass(frozen=True)
class AnalysisResult:
    """``total_flops``, ``total_global_bytes``, ``arithmetic_intensity`` (FLOPs per byte),
    ``estimated_time`` (seconds), ``compute_time`` / ``memory_time`` (seconds; compute is None
    without a tensor-core peak for the dtype), ``bound`` ("compute" or "memory"),
    ``expected_tflops`` (the peak used), ``expected_bandwidth_GBps`` and ``device``."""

    total_flops: int
    total_global_bytes: int
    estimated_time: float
    expected_tflops: Optional[float]
    expected_bandwidth_GBps: float
    arithmetic_intensity: float
    compute_time: Optional[float]
    memory_time: float
    bound: str
    device: str

    def __str__(self) -> str:
        peak = f"{self.expected_tflops} TFLOP/s" if self.expected_tflops else "no tensor-core peak"
        return (f"AnalysisResult({self.device}: {self.total_flops:.4g} FLOPs, {self.total_global_bytes:.4g} "
                f"global bytes, {self.arithmetic_intensity:.3g} FLOP/byte, {self.bound}-bound, "
                f"estimated {self.estimated_time * 1e6:.3f} us at {peak} and "
                f"{self.expected_bandwidth_GBps:g} GB/s)")


class Analyzer:
    """Counts FLOPs and global-memory bytes of one PrimFunc; see the module docstring."""

    def __init__(self, fn: Any, device: Any = None, dynamic: Optional[Mapping[str, int]] = None):
        self.func = _prim_func(fn)
        self.device = _device(device)
        self.dynamic = dict(dynamic or {})
        self.total_flops = 0
        self.total_global_bytes = 0
        self.gemm_dtype: Optional[str] = None

    # -- counting --------------------------------------------------------------------------------
    def _extent(self, e: Any) -> int:
        from tegula.runtime.args import eval_dim

        free = {}
        if isinstance(e, Expr):
            def grab(n: Any) -> None:
                if isinstance(n, Var):
                    free[n] = n
            post_order_visit(e, grab)
        env = {}
        for v in free:
            if v.name not in self.dynamic:
                raise ArgumentError(f"Analyzer: the extent {e} depends on '{v.name}'",
                                    hint=f"pass dynamic={{'{v.name}': value}}")
            env[v] = int(self.dynamic[v.name])
        return int(eval_dim(e, env))

    def _tile_bytes(self, r: BufferRegion) -> int:
        n = 1
        for ext in r.extents:
            n *= self._extent(ext)
        return n * r.buffer.dtype.itemsize

    def _loads(self, node: Any, times: int) -> None:
        def visit(n: Any) -> None:
            if isinstance(n, BufferLoad) and n.buffer.scope == "global":
                self.total_global_bytes += times * n.buffer.dtype.itemsize
        post_order_visit(node, visit)

    def _gemm(self, g: S.Gemm, times: int) -> None:
        m, n = (self._extent(e) for e in _last2(g.C.extents))
        a = [self._extent(e) for e in _last2(g.A.extents)]
        k = a[0] if g.transpose_A else a[1]
        self.total_flops += times * 2 * m * n * k
        self.gemm_dtype = self.gemm_dtype or g.A.buffer.dtype.name

    def _walk(self, s: Any, times: int) -> None:
        if s is None:
            return
        if isinstance(s, S.SeqStmt):
            for c in s.stmts:
                self._walk(c, times)
        elif isinstance(s, S.Kernel):
            blocks = 1
            for g in s.grid:
                blocks *= self._extent(g)
            self._walk(s.body, times * blocks)
        elif isinstance(s, S.For):
            self._walk(s.body, times * max(0, self._extent(s.extent)))
        elif isinstance(s, S.IfThenElse):
            self._loads(s.cond, times)
            self._walk(s.then, times)
            self._walk(s.else_, times)
        elif isinstance(s, (S.While, S.LetStmt, S.AttrStmt)):
            for f in ("cond", "value"):
                if isinstance(getattr(s, f, None), Expr):
                    self._loads(getattr(s, f), times)
            self._walk(s.body, times)
        elif isinstance(s, S.Gemm):
            self._gemm(s, times)
        elif isinstance(s, S.TileOp):
            for v in vars(s).values():
                if isinstance(v, BufferRegion) and v.buffer.scope == "global":
                    self.total_global_bytes += times * self._tile_bytes(v)
                elif isinstance(v, Expr):
                    self._loads(v, times)
        elif isinstance(s, S.BufferStore):
            if s.buffer.scope == "global":
                self.total_global_bytes += times * s.buffer.dtype.itemsize
            self._loads(s.value, times)
            for i in s.indices:
                self._loads(i, times)
        elif isinstance(s, S.Evaluate):
            self._loads(s.value, times)

    def ir_pass(self) -> "Analyzer":
        self.total_flops, self.total_global_bytes = 0, 0
        self._walk(self.func.body, 1)
        return self

    def calculate(self) -> AnalysisResult:
        """The roofline figures of what :meth:`ir_pass` counted."""
        bw = float(self.device.dram_bandwidth_GBps)
        peak = self.device.peak_tflops(self.gemm_dtype) if self.gemm_dtype else None
        mem_t = self.total_global_bytes / (bw * 1e9)
        comp_t = self.total_flops / (peak * 1e12) if peak else None
        est = max(mem_t, comp_t) if comp_t is not None else mem_t
        bound = "compute" if comp_t is not None and comp_t > mem_t else "memory"
        ai = self.total_flops / self.total_global_bytes if self.total_global_bytes else float("inf")
        return AnalysisResult(self.total_flops, self.total_global_bytes, est, peak, bw, ai, comp_t,
                              mem_t, bound, self.device.name)

    @classmethod
    def analysis(cls, fn: Any, device: Any = None, dynamic: Optional[Mapping[str, int]] = None) -> AnalysisResult:
        """Analyse ``fn`` (PrimFunc, JITKernel, or a mapping holding "main") for ``device`` (a
        ``carver.arch.CUDA``, a GPU name such as "H200", or None for the GPU of this process)."""
        return cls(fn, device, dynamic).ir_pass().calculate()


def _last2(extents: tuple) -> tuple:
    return tuple(extents[-2:]) if len(extents) >= 2 else (1,) + tuple(extents)


def _prim_func(fn: Any) -> S.PrimFunc:
    if isinstance(fn, Mapping) and "main" in fn:
        fn = fn["main"]
    fn = getattr(fn, "prim_func", fn)
    if not isinstance(fn, S.PrimFunc):
        raise ArgumentError(f"Analyzer takes a PrimFunc or a JITKernel, got {type(fn).__name__}",
                            hint="for an eager @tilelang.jit function pass f.get_tir(...)")
    return fn


def _device(device: Any) -> Any:
    from tegula.compat.carver import CUDA

    if device is None:
        return CUDA("cuda")
    if isinstance(device, str):
        return CUDA(device)
    if not hasattr(device, "dram_bandwidth_GBps"):
        raise ArgumentError(f"Analyzer: device must be a carver.arch.CUDA or a GPU name, got {device!r}")
    return device
