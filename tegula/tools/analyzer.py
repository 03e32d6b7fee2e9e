"""``tilelang.tools.Analyzer``: a roofline of a kernel from its tile-level IR, without running it,
with the tile reuse of its configuration: what each block computes, what its tiles move through L2,
what DRAM must deliver, and how the blocks fill the GPU.

    result = Analyzer.analysis(func, CUDA("H200"))      # a PrimFunc, JITKernel or {"main": f}
    result.estimated_time, result.bound                 # seconds; "compute", "L2" or "memory"
    print(result.explain())                             # the terms and what they came from

What is counted, over every block of the grid and every trip of the enclosing loops (loops whose
trip count depends on the block index, as in causal attention, are counted block by block):

- **tensor FLOPs**: ``2 * M * N * K`` per ``T.gemm``;
- **special-function ops**: each ``exp``, ``exp2``, ``log``, ``tanh``... an element-wise statement
  evaluates (the SFU work of a softmax);
- **tile bytes** (L2 to SM traffic): every tile a tile operation (``T.copy``, reductions,
  atomics...) reads from or writes to a global buffer, and every element load or store of a global
  buffer: what the blocks' tiles move, so a tile read by two blocks counts twice. That is the
  reuse of the configuration: a 128x256 GEMM tile moves ``(128 + 256) * K * 2`` bytes for
  ``2 * 128 * 256 * K`` FLOPs;
- **DRAM bytes** (compulsory): the footprint of every global buffer the kernel touches, once: L2
  is taken to catch the reuse between blocks (an assumption: rasterized grids on a 50 MB L2);
- **shared memory and registers per block** (shared tiles times the ``num_stages`` of the pipelined
  loop that fills them; fragments as 4-byte registers per thread plus 40 for addresses), which
  give the blocks one SM holds at once.

The prediction, per block and then for the grid::

    block compute = tensor FLOPs / (peak / SMs * TENSOR_EFFICIENCY) + SFU ops / (SFU rate / SMs)
    block tiles   = tile bytes / (L2 tile bandwidth / SMs)
    block time    = max(block compute, block tiles)
    waves         = ceil(blocks / (SMs * blocks per SM))
    time          = max(waves * blocks per SM * block time, DRAM bytes / DRAM bandwidth)

``bound`` names the term that wins. The constants and where they come from: the peaks and DRAM
bandwidth are data-sheet figures (:mod:`tegula.compat.gpus`); ``TENSOR_EFFICIENCY`` (0.75) is the
fraction of the tensor peak a pipelined k-loop sustains (cuBLAS reaches 694-758 of 989 TFLOP/s on
the H200 GEMMs of BENCHMARKS.md); the SFU rate of H100 / H200 is the 3.9 TFLOP/s of special
functions the FlashAttention-3 paper states; the L2 tile bandwidth (7900 GB/s, 60 GB/s per SM) is
*fitted*: it is what one SM's TMA pipeline sustained in the measured GEMM 4096^3 (48 KB every
0.82 us). BENCHMARKS.md ("The Analyzer against the H200") compares the predictions with the
measured GEMM and attention times. GPUs without an L2 or SFU figure leave that term out.

``compute_time`` (FLOPs at the peak) and ``memory_time`` (tile bytes at the DRAM bandwidth, no
reuse) are kept as the plain roofline's two terms. Loops with a dynamic extent take it from
``dynamic={"name": value}``; a branch counts as taken (an upper bound); a ``while`` loop once.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from tegula.autotuner import tuner as _tuner
from tegula.errors import ArgumentError
from tegula.ir import stmt as S
from tegula.ir.buffer import BufferRegion
from tegula.ir.expr import BufferLoad, Call, Expr, Var
from tegula.ir.visitor import post_order_visit

TENSOR_EFFICIENCY = 0.75   # the part of the tensor peak a pipelined k-loop sustains
REGISTER_OVERHEAD = 40     # registers per thread beside the fragments (addresses, indices)
SFU_CALLS = frozenset({"exp", "exp2", "exp10", "log", "log2", "log10", "log1p", "expm1", "tanh",
                       "sigmoid", "sin", "cos", "tan", "erf", "pow", "rsqrt", "sqrt"})
_ENUMERATE_LIMIT = 1 << 16  # block indices enumerated at most for block-dependent trip counts


@dataclass(frozen=True)
class AnalysisResult:
    """The figures of one kernel on one GPU (see the module docstring).

    ``total_flops`` (tensor), ``sfu_ops``, ``total_global_bytes`` (tile bytes: L2 to SM traffic),
    ``dram_bytes`` (compulsory), ``arithmetic_intensity`` (FLOPs per tile byte), ``blocks``,
    ``blocks_per_sm``, ``waves``, ``block_time`` (seconds per block), ``l2_time`` and
    ``dram_time`` (seconds), ``estimated_time`` (the prediction, seconds), ``bound`` ("compute",
    "L2" or "memory"), ``compute_time`` / ``memory_time`` (the plain roofline's terms; compute is
    None without a peak for the dtype), ``expected_tflops``, ``expected_bandwidth_GBps``, ``device``.
    """

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
    sfu_ops: int = 0
    dram_bytes: int = 0
    blocks: int = 0
    blocks_per_sm: int = 1
    waves: int = 0
    block_time: float = 0.0
    l2_time: float = 0.0
    dram_time: float = 0.0
    terms: dict = field(default_factory=dict, compare=False)

    def __str__(self) -> str:
        peak = f"{self.expected_tflops} TFLOP/s" if self.expected_tflops else "no tensor-core peak"
        return (f"AnalysisResult({self.device}: {self.total_flops:.4g} FLOPs, {self.total_global_bytes:.4g} "
                f"tile bytes, {self.dram_bytes:.4g} DRAM bytes, {self.arithmetic_intensity:.3g} FLOP/byte, "
                f"{self.bound}-bound, estimated {self.estimated_time * 1e6:.3f} us at {peak} and "
                f"{self.expected_bandwidth_GBps:g} GB/s)")

    def explain(self) -> str:
        """The prediction term by term, one line each."""
        t = self.terms
        us = 1e6
        lines = [f"{self.device}: {self.blocks} blocks, {self.blocks_per_sm} per SM "
                 f"({t.get('smem_per_block', 0) // 1024} KB shared, {t.get('regs_per_thread', 0)} registers "
                 f"x {t.get('threads', 0)} threads), {self.waves} waves",
                 f"  per block: {t.get('block_flops', 0):.4g} tensor FLOPs -> {t.get('block_tensor', 0) * us:.3f} us, "
                 f"{t.get('block_sfu_ops', 0):.4g} SFU ops -> {t.get('block_sfu', 0) * us:.3f} us, "
                 f"{t.get('block_bytes', 0):.4g} tile bytes -> {t.get('block_tiles', 0) * us:.3f} us",
                 f"  grid: {self.waves} waves x {self.blocks_per_sm} x {self.block_time * us:.3f} us = "
                 f"{t.get('grid_time', 0) * us:.3f} us; DRAM {self.dram_bytes:.4g} bytes -> {self.dram_time * us:.3f} us",
                 f"  predicted {self.estimated_time * us:.3f} us, {self.bound}-bound"]
        return "\n".join(lines)


class _NeedsBlockIndex(Exception):
    def __init__(self, var: Var):
        self.var = var


class Analyzer:
    """Counts the work, traffic and footprint of one PrimFunc; see the module docstring."""

    def __init__(self, fn: Any, device: Any = None, dynamic: Optional[Mapping[str, int]] = None):
        self.func = _prim_func(fn)
        self.device = _device(device)
        self.dynamic = dict(dynamic or {})
        self.total_flops = 0
        self.total_global_bytes = 0
        self.sfu_ops = 0
        self.gemm_dtype: Optional[str] = None
        self.blocks = 0
        self.smem_per_block = 0
        self.regs_per_thread = 0
        self.threads = 0
        self.touched: dict = {}          # global buffer name -> bytes
        self._env: dict = {}             # block indices and let values bound while counting
        self._lets: dict = {}
        self._block_vars: set = set()

    # -- counting --------------------------------------------------------------------------------
    def _value(self, v: Var) -> int:
        if v in self._env:
            return self._env[v]
        if v in self._lets:
            return self._extent(self._lets[v])
        if v in self._block_vars:
            raise _NeedsBlockIndex(v)
        if v.name in self.dynamic:
            return int(self.dynamic[v.name])
        raise ArgumentError(f"Analyzer: the extent {v} depends on '{v.name}'",
                            hint=f"pass dynamic={{'{v.name}': value}}")

    def _extent(self, e: Any) -> int:
        from tegula.runtime.args import eval_dim

        free: dict = {}
        if isinstance(e, Expr):
            post_order_visit(e, lambda n: free.setdefault(n, n) if isinstance(n, Var) else None)
        return int(eval_dim(e, {v: self._value(v) for v in free}))

    def _tile_bytes(self, r: BufferRegion) -> int:
        n = 1
        for ext in r.extents:
            n *= self._extent(ext)
        return n * r.buffer.dtype.itemsize

    def _global(self, buf: Any, nbytes: int) -> None:
        self.total_global_bytes += nbytes
        self.touched.setdefault(buf.name, buf)

    def _expr(self, node: Any, times: int) -> None:
        """Global element loads and special-function calls of an expression evaluated ``times``."""
        def visit(n: Any) -> None:
            if isinstance(n, BufferLoad) and n.buffer.scope == "global":
                self._global(n.buffer, times * n.buffer.dtype.itemsize)
            elif isinstance(n, Call) and n.name in SFU_CALLS:
                self.sfu_ops += times
        post_order_visit(node, visit)

    def _gemm(self, g: S.Gemm, times: int) -> None:
        m, n = (self._extent(e) for e in _last2(g.C.extents))
        a = [self._extent(e) for e in _last2(g.A.extents)]
        k = a[0] if g.transpose_A else a[1]
        self.total_flops += times * 2 * m * n * k
        self.gemm_dtype = self.gemm_dtype or g.A.buffer.dtype.name

    def _kernel(self, k: S.Kernel, times: int) -> None:
        self._block_vars = set(k.block_vars)
        dims = [self._extent(g) for g in k.grid]
        self.blocks += times * math.prod(dims)
        self.threads = max(self.threads, math.prod(int(t) for t in k.threads))
        self._footprint(k)
        needed: list = []   # block indices some trip count depends on: counted block by block
        while True:
            saved = (self.total_flops, self.total_global_bytes, self.sfu_ops)
            try:
                self._per_block(k, dims, needed, times)
                return
            except _NeedsBlockIndex as e:
                self.total_flops, self.total_global_bytes, self.sfu_ops = saved
                needed.append(e.var)

    def _per_block(self, k: S.Kernel, dims: list, needed: list, times: int) -> None:
        pos = [k.block_vars.index(v) for v in needed]
        rest = math.prod(d for i, d in enumerate(dims) if i not in pos)
        ranges = [range(dims[i]) for i in pos]
        if math.prod(len(r) for r in ranges) > _ENUMERATE_LIMIT:
            raise ArgumentError("Analyzer: too many blocks whose trip counts differ to count one by one",
                                hint="analyse a smaller grid")
        for values in itertools.product(*ranges):
            self._env = dict(zip(needed, values))
            self._walk(k.body, times * rest)
        self._env = {}

    def _footprint(self, k: S.Kernel) -> None:
        """Shared bytes (times the stages of the pipelined loop that fills a tile) and fragment
        registers per thread of one block."""
        stages: dict = {}

        def see(n: Any) -> None:
            if isinstance(n, S.For) and n.kind == "pipelined":
                s = int(n.annotations.get("num_stages") or 1)
                post_order_visit(n.body, lambda c: stages.__setitem__(id(c.dst.buffer), s)
                                 if isinstance(c, S.Copy) else None)
        post_order_visit(k.body, see)
        smem, words = 0, 0
        for b in k.allocs:
            if not b.is_static:
                continue
            nbytes = int(b.numel()) * b.dtype.itemsize
            if b.is_shared:
                smem += nbytes * stages.get(id(b), 1)
            elif b.is_fragment:
                words += -(-nbytes // 4)
        threads = max(1, math.prod(int(t) for t in k.threads))
        self.smem_per_block = max(self.smem_per_block, smem)
        self.regs_per_thread = max(self.regs_per_thread, -(-words // threads) + REGISTER_OVERHEAD)

    def _walk(self, s: Any, times: int) -> None:
        if s is None:
            return
        if isinstance(s, S.SeqStmt):
            for c in s.stmts:
                self._walk(c, times)
        elif isinstance(s, S.Kernel):
            self._kernel(s, times)
        elif isinstance(s, S.For):
            self._walk(s.body, times * max(0, self._extent(s.extent)))
        elif isinstance(s, S.IfThenElse):
            self._expr(s.cond, times)
            self._walk(s.then, times)
            self._walk(s.else_, times)
        elif isinstance(s, S.LetStmt):   # binds its var for the statements after it
            self._lets[s.var] = s.value
            self._expr(s.value, times)
        elif isinstance(s, (S.While, S.AttrStmt)):
            for f in ("cond", "value"):
                if isinstance(getattr(s, f, None), Expr):
                    self._expr(getattr(s, f), times)
            self._walk(s.body, times)
        elif isinstance(s, S.Gemm):
            self._gemm(s, times)
        elif isinstance(s, S.TileOp):
            for v in vars(s).values():
                if isinstance(v, BufferRegion) and v.buffer.scope == "global":
                    self._global(v.buffer, times * self._tile_bytes(v))
                elif isinstance(v, Expr):
                    self._expr(v, times)
        elif isinstance(s, S.BufferStore):
            if s.buffer.scope == "global":
                self._global(s.buffer, times * s.buffer.dtype.itemsize)
            self._expr(s.value, times)
            for i in s.indices:
                self._expr(i, times)
        elif isinstance(s, S.Evaluate):
            self._expr(s.value, times)

    def ir_pass(self) -> "Analyzer":
        """Count the kernel's work and traffic (see the module docstring)."""
        self.total_flops, self.total_global_bytes, self.sfu_ops, self.blocks = 0, 0, 0, 0
        self.touched = {}
        self._lets = {}
        self._walk(self.func.body, 1)
        return self

    def dram_bytes(self) -> int:
        """Compulsory DRAM bytes: each global buffer the kernel touches, once."""
        total = 0
        for buf in self.touched.values():
            try:
                total += self._extent(buf.numel()) * buf.dtype.itemsize
            except ArgumentError:   # a dynamic dimension without a value: no footprint from it
                pass
        return min(total, self.total_global_bytes)

    def calculate(self) -> AnalysisResult:
        """The prediction from what :meth:`ir_pass` counted (see the module docstring)."""
        dev = self.device
        sms = max(1, int(getattr(dev, "compute_max_core", 0) or 1))
        bw = float(dev.dram_bandwidth_GBps)
        peak = dev.peak_tflops(self.gemm_dtype) if self.gemm_dtype else None
        sfu = float(getattr(dev, "sfu_tops", 0) or 0)
        l2 = float(getattr(dev, "l2_tile_GBps", 0) or 0)
        blocks = max(1, self.blocks)
        dram = self.dram_bytes()
        block_flops = self.total_flops / blocks
        block_sfu_ops = self.sfu_ops / blocks
        block_bytes = self.total_global_bytes / blocks
        t_tensor = block_flops / (peak * 1e12 / sms * TENSOR_EFFICIENCY) if peak and block_flops else 0.0
        t_sfu = block_sfu_ops / (sfu * 1e12 / sms) if sfu and block_sfu_ops else 0.0
        t_tiles = block_bytes / (l2 * 1e9 / sms) if l2 else 0.0
        block_time = max(t_tensor + t_sfu, t_tiles)
        per_sm = min(self._blocks_per_sm(dev), -(-blocks // sms))   # a small grid spreads out
        waves = -(-blocks // (sms * per_sm))
        grid_time = waves * per_sm * block_time
        dram_time = dram / (bw * 1e9)
        est = max(grid_time, dram_time)
        if dram_time >= grid_time:
            bound = "memory"
        else:
            bound = "compute" if t_tensor + t_sfu >= t_tiles else "L2"
        mem_t = self.total_global_bytes / (bw * 1e9)
        comp_t = self.total_flops / (peak * 1e12) if peak else None
        ai = self.total_flops / self.total_global_bytes if self.total_global_bytes else float("inf")
        terms = {"smem_per_block": self.smem_per_block, "regs_per_thread": self.regs_per_thread,
                 "threads": self.threads, "block_flops": block_flops, "block_tensor": t_tensor,
                 "block_sfu_ops": block_sfu_ops, "block_sfu": t_sfu, "block_bytes": block_bytes,
                 "block_tiles": t_tiles, "grid_time": grid_time}
        return AnalysisResult(self.total_flops, self.total_global_bytes, est, peak, bw, ai, comp_t,
                              mem_t, bound, dev.name, self.sfu_ops, dram, blocks, per_sm, waves,
                              block_time, waves * per_sm * t_tiles, dram_time, terms)

    def _blocks_per_sm(self, dev: Any) -> int:
        """Blocks one SM holds at once: by threads (2048), shared memory and registers (64K)."""
        n = 32
        if self.threads:
            n = min(n, max(1, 2048 // self.threads))
            n = min(n, max(1, 65536 // (self.threads * max(1, self.regs_per_thread))))
        cap = int(getattr(dev, "smem_cap", 0) or 0)
        if cap and self.smem_per_block:
            n = min(n, max(1, cap // self.smem_per_block))
        return n

    @classmethod
    def analysis(cls, fn: Any, device: Any = None, dynamic: Optional[Mapping[str, int]] = None) -> AnalysisResult:
        """Analyse ``fn`` (PrimFunc, JITKernel, or a mapping holding "main") for ``device`` (a
        ``carver.arch.CUDA``, a GPU name such as "H200", or None for the GPU of this process).
        Raises ArgumentError for something that is not a kernel, or an extent that depends on a
        dynamic dimension ``dynamic`` does not give."""
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


def analysis_device() -> Any:
    """The GPU the autotune table's predictions are for (a ``carver.CUDA``): this process's GPU
    when there is one the GPU table knows, else the H200 (the GPU of BENCHMARKS.md)."""
    from tegula.compat.carver import CUDA
    from tegula.errors import ConfigError
    from tegula.target import gpu_available

    if gpu_available():
        try:
            return CUDA("cuda")
        except ConfigError:
            pass
    return CUDA("H200")


def predict_for_autotune(fn: Any) -> Optional[tuple]:
    """``(milliseconds, bound, device name)`` of a configuration, for the autotune table."""
    r = Analyzer.analysis(fn, analysis_device())
    return r.estimated_time * 1e3, r.bound, r.device


_tuner.set_predictor(predict_for_autotune)
