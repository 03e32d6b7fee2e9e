"""``kernel.get_profiler()``: check a kernel against a reference and time it."""
from __future__ import annotations

import enum
import statistics
import time
from typing import Any, Callable, Optional, Sequence

import numpy as np

from tegula.errors import ArgumentError
from tegula.ir.buffer import Buffer
from tegula.ir.expr import Var
from tegula.runtime import args as A


class TensorSupplyType(enum.Enum):
    """What ``get_profiler(tensor_supply_type=...)`` fills inputs with (TileLang's names)."""

    Integer = 1
    Uniform = 2
    Normal = 3
    Randn = 4
    Zero = 5
    One = 6
    Auto = 7


def random_tensor(p: Buffer, shape: tuple, rng: np.random.Generator, use_torch: bool, device: str,
                  supply: "TensorSupplyType" = None) -> Any:
    """Inputs of the parameter's dtype, as TileLang's supply types give them. ``Auto`` (the
    default): floats uniform in [-1, 1), unsigned ints 0..2, other ints -2..2, fp8 the integers
    -128..127, bools 0/1. ``Integer``: the same integers, floats too (-2..2). ``Uniform``:
    uniform in [-1, 1); ``Normal``: normal with mean -1 and deviation 1; ``Randn``: standard
    normal (ints: -8..7 for both); ``Zero`` and ``One`` as their names say."""
    d = p.dtype
    supply = supply or TensorSupplyType.Auto
    small = supply in (TensorSupplyType.Auto, TensorSupplyType.Integer)
    if supply is TensorSupplyType.Zero or supply is TensorSupplyType.One:
        arr = np.full(shape, 0 if supply is TensorSupplyType.Zero else 1).astype(d.np)
    elif d.is_bool:
        arr = rng.integers(0, 2, shape).astype(np.bool_)
    elif small and d.name.startswith("float8"):
        arr = rng.integers(-128, 128, shape).astype(np.float32).astype(d.np)
    elif small and d.kind == "uint":
        arr = rng.integers(0, 3, shape).astype(d.np)
    elif d.is_float and supply in (TensorSupplyType.Auto, TensorSupplyType.Uniform):
        arr = rng.uniform(-1.0, 1.0, shape).astype(np.float32).astype(d.np)
    elif small:
        arr = rng.integers(-2, 3, shape).astype(d.np)
    elif d.is_float:
        mean = -1.0 if supply is TensorSupplyType.Normal else 0.0
        arr = (rng.standard_normal(shape) + mean).astype(np.float32).astype(d.np)
    else:
        lo, hi = (0, 8) if d.kind == "uint" else (-8, 8)
        arr = rng.integers(lo, hi, shape).astype(d.np)
    if not use_torch:
        return arr
    import torch

    if d.name == "bfloat16":
        t = torch.from_numpy(arr.view(np.int16).copy()).view(torch.bfloat16)
    elif d.name.startswith("float8"):
        t = torch.from_numpy(arr.view(np.uint8).copy()).view(A._torch_dtype(d))
    else:
        t = torch.from_numpy(np.ascontiguousarray(arr))
    return t.to(device)


class Profiler:
    """Generates inputs for a kernel, compares it with a reference and times it."""

    def __init__(self, kernel: Any, dynamic: dict, seed: Optional[int] = None,
                 supply: Optional[TensorSupplyType] = None):
        self.kernel = kernel
        self.dynamic = dynamic
        self.supply = supply
        self.rng = np.random.default_rng(seed)
        try:
            import torch  # noqa: F401

            self.use_torch = True
        except ImportError:
            self.use_torch = kernel.device != "cpu"

    def _dyn_value(self, v: Var) -> int:
        if v.name in self.dynamic:
            return int(self.dynamic[v.name])
        return 256

    def make_inputs(self) -> list:
        """Random inputs for every non-output parameter (dynamic dims: ``dynamic`` or 256)."""
        func = self.kernel.func
        dyn = {v: self._dyn_value(v) for v in func.dynamic_vars()}
        out = []
        for i in self.kernel.inputs:
            p = func.params[i]
            if isinstance(p, Var):
                if p in dyn:
                    out.append(dyn[p])
                    continue
                raise ArgumentError(f"the profiler cannot invent scalar argument '{p.name}'",
                                    hint="pass input_tensors= to do_bench / assert_allclose")
            shape = tuple(A.eval_dim(d, dyn) for d in p.shape)
            out.append(random_tensor(p, shape, self.rng, self.use_torch, self.kernel.device, self.supply))
        return out

    @property
    def func(self) -> Any:
        """The kernel being profiled (``profiler.do_bench(profiler.func)`` times the kernel)."""
        return self.kernel

    def run_once(self, func: Optional[Callable] = None) -> Any:
        """Run the kernel (or ``func``) once on fresh inputs; returns its outputs."""
        ins = self.make_inputs()
        return (func or self.kernel)(*ins)

    def assert_allclose(self, reference_program: Callable, rtol: float = 1e-2, atol: float = 1e-2,
                        input_tensors: Optional[Sequence[Any]] = None, max_mismatched_ratio: float = 0.01) -> None:
        """Run kernel and reference on the same random inputs; raise AssertionError when more than
        ``max_mismatched_ratio`` of an output's elements (TileLang's default: 1%) differ beyond
        ``rtol`` / ``atol``."""
        ins = list(input_tensors) if input_tensors is not None else self.make_inputs()
        got = self.kernel(*ins)
        want = reference_program(*ins)
        gots = got if isinstance(got, tuple) else (got,)
        wants = want if isinstance(want, (tuple, list)) else (want,)
        if len(gots) != len(wants):
            raise AssertionError(f"the kernel returned {len(gots)} output(s), the reference {len(wants)}")
        for k, (g, w) in enumerate(zip(gots, wants)):
            g64, w64 = _as_f64(g), _as_f64(w)
            if g64.shape != w64.shape:
                raise AssertionError(f"output {k}: shape {g64.shape} vs reference {w64.shape}")
            bad = ~np.isclose(g64, w64, rtol=rtol, atol=atol, equal_nan=True)
            if bad.mean() > max_mismatched_ratio:
                idx = np.unravel_index(np.argmax(np.abs(g64 - w64) * bad), g64.shape)
                raise AssertionError(
                    f"output {k}: {int(bad.sum())} of {bad.size} elements differ beyond rtol={rtol}, "
                    f"atol={atol}; e.g. at {tuple(int(i) for i in idx)}: kernel {g64[idx]} vs reference {w64[idx]}")

    def do_bench(self, func: Optional[Callable] = None, warmup: float = 25, rep: float = 100,
                 n_warmup: int = 0, n_repeat: int = 0, input_tensors: Optional[Sequence[Any]] = None,
                 backend: str = "event", quantiles: Optional[Sequence[float]] = None,
                 return_mode: str = "median", **_: Any) -> Any:
        """Time the kernel (or ``func``) on the profiler's inputs: the median in milliseconds by
        default (``return_mode``, ``quantiles`` as for :func:`do_bench`). ``warmup`` and ``rep``
        are time budgets in ms (at least one run each); ``n_warmup`` / ``n_repeat`` fix the counts
        instead. ``backend`` ("event", "cupti", "cudagraph", "wall") is accepted: CUDA events
        time GPU kernels, the wall clock the interpreter."""
        ins = list(input_tensors) if input_tensors is not None else self.make_inputs()
        fn = (lambda: func(*ins)) if func is not None else (lambda: self.kernel(*ins))
        times = bench_times(fn, warmup, rep, n_warmup, n_repeat, gpu=self.kernel.device != "cpu")
        return summarize(times, return_mode, quantiles)


_RETURN_MODES = ("min", "max", "mean", "median")


def summarize(times: Sequence[float], return_mode: str = "mean",
              quantiles: Optional[Sequence[float]] = None) -> Any:
    """``quantiles`` of ``times`` (a list) when given, else their min / max / mean / median."""
    if quantiles is not None:
        arr = np.asarray(times, dtype=np.float64)
        return [float(np.quantile(arr, q)) for q in quantiles]
    if return_mode not in _RETURN_MODES:
        raise ArgumentError(f"do_bench: return_mode must be one of {', '.join(_RETURN_MODES)}, got {return_mode!r}")
    return float({"min": min, "max": max, "mean": statistics.fmean,
                  "median": statistics.median}[return_mode](times))


def bench_times(fn: Callable[[], Any], warmup: float, rep: float, n_warmup: int = 0, n_repeat: int = 0,
                gpu: bool = False) -> list:
    """Milliseconds of each timed call of ``fn``: CUDA events around each call on the GPU (the
    host's launch overhead between calls does not count), the wall clock otherwise."""
    if gpu:
        return _bench_events(fn, warmup, rep, n_warmup, n_repeat)
    t0 = time.perf_counter()
    fn()
    first = (time.perf_counter() - t0) * 1e3
    nw = n_warmup or max(0, int(warmup / max(first, 1e-3)) - 1)
    for _ in range(min(nw, 1000)):
        fn()
    nr = n_repeat or max(1, int(rep / max(first, 1e-3)))
    times = []
    for _ in range(min(nr, 10000)):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1e3)
    return times


def do_bench(fn: Callable[[], Any], warmup: float = 25, rep: float = 100, _n_warmup: int = 0,
             _n_repeat: int = 0, quantiles: Optional[Sequence[float]] = None, fast_flush: bool = True,
             backend: str = "event", return_mode: str = "mean", device: Any = None, **_: Any) -> Any:
    """Time ``fn()`` (TileLang's ``tilelang.profiler.do_bench``): milliseconds, the ``return_mode``
    of the timed runs (``"mean"`` by default) or a list of ``quantiles``. On a GPU each run is timed
    with CUDA events (``backend`` "event", "cupti" and "cudagraph" all do that); without one, or
    with ``backend="wall"`` or a CPU ``device``, with the wall clock. ``fast_flush`` is accepted."""
    from tegula.target import gpu_available

    gpu = backend != "wall" and gpu_available() and (device is None or "cpu" not in str(device))
    return summarize(bench_times(fn, warmup, rep, _n_warmup, _n_repeat, gpu), return_mode, quantiles)


def _bench_events(fn: Callable[[], Any], warmup: float, rep: float, n_warmup: int, n_repeat: int) -> list:
    """Milliseconds of each timed call of ``fn`` on the GPU, timed with CUDA events."""
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    torch.cuda.synchronize()
    first = max(start.elapsed_time(end), 1e-3)
    for _ in range(min(n_warmup or max(1, int(warmup / first)), 1000)):
        fn()
    nr = min(n_repeat or max(1, int(rep / first)), 10000)
    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(nr)]
    for a, b in pairs:
        a.record()
        fn()
        b.record()
    torch.cuda.synchronize()
    return [a.elapsed_time(b) for a, b in pairs]


def _as_f64(x: Any) -> np.ndarray:
    if A.is_torch(x):
        x = x.detach().cpu()
        import torch

        if x.dtype in (torch.bfloat16, torch.float16) or "float8" in str(x.dtype):
            x = x.float()
        return x.double().numpy() if x.dtype != torch.bool else x.numpy().astype(np.float64)
    return np.asarray(x).astype(np.float64)
