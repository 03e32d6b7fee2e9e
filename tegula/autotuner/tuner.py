"""``tegula.autotune``: pick the fastest configuration of a kernel factory, as TileLang does::

    @tegula.autotune(configs=[{"block_M": 64, "block_N": 64}, {"block_M": 128, "block_N": 128}],
                     ref_prog=lambda a, b: a @ b)
    @tegula.jit(out_idx=[-1])
    def matmul(M, N, K, block_M=128, block_N=128, block_K=32): ...

    kernel = matmul(1024, 1024, 1024)   # tunes, then returns the best JITKernel
    kernel.config, kernel.latency       # {"block_M": 128, "block_N": 128}, milliseconds

Calling the decorated factory with the arguments that are not tuned:

1. builds every configuration's kernel: the frontend in this thread, lowering and the CUDA
   compiler in a thread pool (NVRTC and nvcc release the GIL);
2. checks each against ``ref_prog`` on the profiler's random inputs (unless ``skip_check``);
3. times each with the profiler's ``do_bench`` (``warmup`` / ``rep`` in ms);
4. returns the fastest, and keeps the choice in the disk cache (JSON, see
   :mod:`tegula.autotuner.cache`) so that the next process builds only that configuration.

A call that gives any tuned argument itself (by keyword or position) searches nothing, as in
TileLang: it builds the kernel of its own arguments, the function's defaults filling the tuned
arguments it leaves out (one without a default is an ArgumentError naming it). The same holds for
``f.compile(...)`` of an eager function.

A configuration that fails to build (a CompileError, a ResourceError for too much shared memory,
any other error) or gives wrong results is skipped with a one-line reason on stderr; tuning fails
only when every configuration does. A progress bar goes to stderr.
"""
from __future__ import annotations

import concurrent.futures as cf
import contextlib
import contextvars
import functools
import inspect
import os
import sys
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence, Union

from tegula.autotuner import cache as result_cache
from tegula.errors import ArgumentError, TegulaError


_TUNE_INPUTS: contextvars.ContextVar[Optional[list]] = contextvars.ContextVar("tegula_autotune_inputs",
                                                                             default=None)


@contextlib.contextmanager
def set_autotune_inputs(*args: Any) -> Any:
    """Within the block, autotuning times and checks every configuration on these inputs (the
    kernel's inputs in order, or one list of them) instead of random ones."""
    values = list(args[0]) if len(args) == 1 and isinstance(args[0], (list, tuple)) else list(args)
    token = _TUNE_INPUTS.set(values)
    try:
        yield values
    finally:
        _TUNE_INPUTS.reset(token)


# -- the two steps tests replace: checking and timing one kernel -----------------------------

def check(kernel: Any, inputs: Callable[[], list], reference: Callable[[list], Any], rtol: float,
          atol: float, max_mismatched_ratio: float) -> None:
    """Raise AssertionError when ``kernel`` disagrees with the reference on ``inputs()``."""
    ins = inputs()
    want = reference(ins)
    kernel.get_profiler().assert_allclose(lambda *_: want, rtol=rtol, atol=atol, input_tensors=ins,
                                          max_mismatched_ratio=max_mismatched_ratio)


def measure(kernel: Any, inputs: Callable[[], list], warmup: float, rep: float) -> float:
    """Milliseconds per run of ``kernel`` on ``inputs()`` (the profiler's median)."""
    return float(kernel.get_profiler().do_bench(warmup=warmup, rep=rep, input_tensors=inputs()))


# -- a progress bar without dependencies -------------------------------------------------------

class Progress:
    """``name [#####-----] 5/12 phase`` redrawn in place on stderr; notes print above it."""

    def __init__(self, name: str, total: int, enabled: bool = True, width: int = 24):
        self.name, self.total, self.enabled, self.width = name, total, enabled, width
        self.done, self.phase, self._shown = 0, "", False

    def _draw(self) -> None:
        if not self.enabled:
            return
        filled = self.width * self.done // max(self.total, 1)
        bar = "#" * filled + "-" * (self.width - filled)
        sys.stderr.write(f"\r{self.name} [{bar}] {self.done}/{self.total} {self.phase:<10}")
        sys.stderr.flush()
        self._shown = True

    def start(self, phase: str) -> None:
        self.done, self.phase = 0, phase
        self._draw()

    def step(self) -> None:
        self.done += 1
        self._draw()

    def note(self, line: str) -> None:
        if self._shown:
            sys.stderr.write("\r" + " " * (len(self.name) + self.width + 30) + "\r")
        sys.stderr.write(line + "\n")
        self._draw()

    def close(self) -> None:
        if self.enabled and self._shown:
            sys.stderr.write("\n")
            sys.stderr.flush()
        self._shown = False


def _reason(e: BaseException) -> str:
    """One line: the exception's type and the first line of its message."""
    text = str(e).strip().splitlines()
    first = text[0] if text else ""
    if len(first) > 160:
        first = first[:157] + "..."
    return f"{type(e).__name__}: {first}" if first else type(e).__name__


@dataclass
class Candidate:
    """One configuration on its way through tuning."""

    index: int
    config: dict
    func: Any = None       # the PrimFunc
    kernel: Any = None     # the JITKernel
    latency: Optional[float] = None
    error: Optional[str] = None
    predicted: Optional[float] = None   # the Analyzer's time, milliseconds
    bound: Optional[str] = None         # and what bounds it

    def summary(self) -> dict:
        return {"config": self.config, "latency": self.latency, "error": self.error,
                "predicted": self.predicted, "bound": self.bound}


# The Analyzer's prediction of a configuration: ``fn(prim_func_or_kernel) -> (ms, bound, device)``
# or None. The tools layer installs it (tegula/tools/analyzer.py: the autotuner sits below the
# tools and the GPU figures, so it is handed the Analyzer rather than importing it).
PREDICTOR: Optional[Callable[[Any], Optional[tuple]]] = None


def set_predictor(fn: Optional[Callable[[Any], Optional[tuple]]]) -> None:
    """Install the function that predicts a configuration's time for the autotune table."""
    global PREDICTOR
    PREDICTOR = fn


def predict(c: Candidate) -> str:
    """Fill ``c.predicted`` (ms) and ``c.bound`` from the predictor; returns the device it
    predicted for ("" when there is no predictor or it cannot say)."""
    fn = c.func if c.func is not None else c.kernel
    if PREDICTOR is None or fn is None:
        return ""
    try:
        got = PREDICTOR(fn)
    except Exception:  # noqa: BLE001 (a dynamic extent, an unknown GPU: no prediction, tuning goes on)
        return ""
    if got is None:
        return ""
    c.predicted, c.bound, device = got
    return device


def format_table(results: Sequence[dict], device: str = "") -> str:
    """``kernel.autotune_results`` as a table: every configuration tried, its measured time, the
    Analyzer's prediction and bound beside it (or why it was skipped), fastest first."""
    keys: list = []
    for r in results:
        keys += [k for k in r["config"] if k not in keys]
    head = [*keys, "measured ms", f"predicted ms{f' ({device})' if device else ''}", "bound", "note"]
    rows = []
    order = sorted(results, key=lambda r: (r.get("latency") is None, r.get("latency") or 0.0))
    for r in order:
        lat, pred = r.get("latency"), r.get("predicted")
        rows.append([*(str(r["config"].get(k, "")) for k in keys),
                     f"{lat:.4f}" if lat is not None else "-", f"{pred:.4g}" if pred is not None else "-",
                     r.get("bound") or "-", (r.get("error") or "")[:60]])
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(head)]
    line = lambda cells: "  ".join(c.rjust(w) if i < len(head) - 2 else c.ljust(w)  # noqa: E731
                                   for i, (c, w) in enumerate(zip(cells, widths))).rstrip()
    return "\n".join([line(head), *(line(row) for row in rows)])


class AutoTuneFunction:
    """What ``@tegula.autotune(...)`` returns: call it like the factory, get the best JITKernel."""

    def __init__(self, jit_function: Any, configs: Union[Sequence[dict], Callable[..., Sequence[dict]]],
                 warmup: float, rep: float, ref_prog: Optional[Callable], supply_prog: Optional[Callable],
                 rtol: float, atol: float, max_mismatched_ratio: float, skip_check: bool,
                 cache_input_tensors: bool, max_workers: Optional[int], progress: bool):
        self.jit_function = jit_function
        self.configs = configs
        self.warmup, self.rep = warmup, rep
        self.ref_prog, self.supply_prog = ref_prog, supply_prog
        self.rtol, self.atol, self.max_mismatched_ratio = rtol, atol, max_mismatched_ratio
        self.skip_check = skip_check
        self.cache_input_tensors = cache_input_tensors
        self.max_workers = max_workers
        self.progress = progress
        self._best: dict = {}
        functools.update_wrapper(self, jit_function.func)

    @property
    def name(self) -> str:
        return getattr(self.jit_function.func, "__name__", "kernel")

    # -- configurations ------------------------------------------------------------------------
    def _configs(self, given: dict, args: tuple = (), kwargs: Optional[dict] = None) -> list[dict]:
        """The configurations: the list, or what the function ``configs`` returns. A function
        whose parameters are named like the factory's gets those arguments by name; one whose
        positional parameters are not (TileLang-Ascend's ``get_configs(key_args, key_kwargs)``)
        gets the call's positional arguments and its sorted keyword items, as TileLang-Ascend
        calls it."""
        configs = self.configs
        if callable(configs):
            sig = inspect.signature(configs)
            takes_any = any(p.kind == p.VAR_KEYWORD for p in sig.parameters.values())
            positional = [p for p in sig.parameters.values()
                          if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
            factory = self.jit_function.signature.parameters
            if positional and not takes_any and not any(p.name in factory for p in positional):
                configs = configs(tuple(args), tuple(sorted((kwargs or {}).items())))
            else:
                configs = configs(**{k: v for k, v in given.items() if takes_any or k in sig.parameters})
        configs = [dict(c) for c in (configs or [])]
        if not configs or not all(isinstance(c, dict) for c in configs):
            raise ArgumentError(f"autotune({self.name}): configs must be a non-empty list of dicts "
                                "of factory keyword arguments (or a function returning one)")
        params = self.jit_function.signature.parameters
        if not any(p.kind == p.VAR_KEYWORD for p in params.values()):
            for c in configs:
                unknown = sorted(set(c) - set(params))
                if unknown:
                    raise ArgumentError(f"autotune({self.name}): config {c} names {', '.join(unknown)}, "
                                        f"not parameters of {self.name}{self.jit_function.signature}")
        return configs

    def _given_config(self, configs: list[dict], given: dict) -> bool:
        """True when the call gives a tuned argument itself: then, as in TileLang, nothing is
        searched and the kernel is built from the call's arguments, the function's defaults
        filling the tuned ones left out (an ArgumentError names those that have none)."""
        tuned = list(dict.fromkeys(k for c in configs for k in c))
        named = [k for k in tuned if k in given]
        if not named:
            return False
        params = self.jit_function.signature.parameters
        missing = [k for k in tuned if k not in given and k in params
                   and params[k].default is inspect.Parameter.empty]
        if missing:
            raise ArgumentError(
                f"autotune({self.name}): the call gives the tuned argument(s) "
                f"{', '.join(named)}, so it builds that configuration without searching, and "
                f"{', '.join(missing)} has no default",
                hint=f"give {', '.join(missing)} too, or leave every tuned argument "
                     f"({', '.join(tuned)}) out to search the configurations")
        return True

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from tegula.jit import _freeze

        jf = self.jit_function
        try:
            given = dict(jf.signature.bind_partial(*args, **kwargs).arguments)
        except TypeError as e:
            raise ArgumentError(f"{self.name}(): {e}") from None
        configs = self._configs(given, args, kwargs)
        if self._given_config(configs, given):
            return jf(*args, **kwargs)
        if jf.eager:
            return self._eager(given, configs)
        # each configuration once (no tuned argument is in ``given`` here)
        seen, merged = set(), []
        for c in configs:
            if _freeze(c) not in seen:
                seen.add(_freeze(c))
                merged.append(c)
        key = _freeze(given)
        if key in self._best:
            return self._best[key]
        kernel = self._from_disk(given, merged) or self._tune(given, merged)
        self._best[key] = kernel
        return kernel

    # -- eager functions: tune on the call's own tensors, then run the best -----------------------
    def _eager(self, given: dict, configs: list[dict]) -> Any:
        """Build every configuration for the call's tensors, check and time each on them (or on
        ``set_autotune_inputs``), remember the best for these shapes and return its outputs."""
        from tegula.jit import _freeze

        jf = self.jit_function
        tensors = {n: given[n] for n in jf.tensor_names if n in given}
        others = {k: v for k, v in given.items() if k not in tensors}
        key = ("eager", _freeze(others),
               tuple((n, str(t.dtype), tuple(int(d) for d in t.shape)) for n, t in tensors.items()))
        best = self._best.get(key)
        if best is None:
            ins = [tensors[n] for n in jf.tensor_names]

            def build(config: dict) -> Any:
                t, o = jf._split((), {**given, **config})
                return jf._eager_kernel(t, o, {})

            best = self._serial(given, configs, build, _Inputs(lambda _params: ins, True))
            self._best[key] = best
        return best(*[tensors[n] for n in jf.tensor_names])

    def compile(self, **kwargs: Any) -> Any:
        """Eager style, ahead of time: ``f.compile(M=..., N=...)`` (shape symbols and arguments as
        for ``JITFunction.compile``) tunes the configurations on random inputs of those shapes
        (or ``supply_prog`` / ``set_autotune_inputs``) and returns the best JITKernel, with
        ``config`` and ``latency``. Lazy style: the same as calling the factory."""
        from tegula.jit import _freeze

        jf = self.jit_function
        if not jf.eager:
            return self(**kwargs)
        configs = self._configs(kwargs, (), kwargs)
        if self._given_config(configs, kwargs):
            return jf.compile(**kwargs)
        key = ("compiled", _freeze(kwargs))
        if key not in self._best:
            self._best[key] = self._serial(kwargs, configs, lambda c: jf.compile(**kwargs, **c),
                                           _Inputs(self.supply_prog, self.cache_input_tensors))
        return self._best[key]

    def _serial(self, given: dict, configs: list[dict], build: Callable[[dict], Any], inputs: "_Inputs") -> Any:
        """Build, check and time each configuration (once each) one after the other in this
        thread; the best kernel (see :meth:`_pick`)."""
        merged: list[dict] = []
        for c in configs:
            if c not in merged:
                merged.append(c)
        bar = Progress(f"autotune {self.name}", len(merged), self.progress)
        cands = [Candidate(i, c) for i, c in enumerate(merged)]
        reference = _Reference(self.ref_prog, True)
        bar.start("tuning")
        for c in cands:
            try:
                c.kernel = build(c.config)
                c.kernel.config = dict(c.config)
                supply = functools.partial(inputs.get, c.kernel)
                if self.ref_prog is not None and not self.skip_check:
                    check(c.kernel, supply, reference.get, self.rtol, self.atol, self.max_mismatched_ratio)
                c.latency = measure(c.kernel, supply, self.warmup, self.rep)
            except AssertionError as e:
                c.error = f"wrong results: {_reason(e).split(': ', 1)[-1]}"
                bar.note(f"autotune {self.name}: skipped {c.config}: {c.error}")
            except Exception as e:
                c.error = _reason(e)
                bar.note(f"autotune {self.name}: skipped {c.config}: {c.error}")
            bar.step()
        bar.close()
        return self._pick(cands)

    def _pick(self, cands: list) -> Any:
        """The fastest candidate's kernel, with ``config``, ``latency`` and ``autotune_results``;
        TegulaError naming the reasons when none ran."""
        timed = [c for c in cands if c.latency is not None]
        if not timed:
            reasons = "; ".join(f"{c.config}: {c.error}" for c in cands[:8])
            raise TegulaError(f"autotune({self.name}): none of the {len(cands)} configurations "
                              "built, passed the check and ran", hint=reasons)
        best = min(timed, key=lambda c: c.latency)  # type: ignore[arg-type, return-value]
        device = ""
        for c in cands:
            device = predict(c) or device
        kernel = best.kernel
        kernel.latency = best.latency
        kernel.autotune_results = [c.summary() for c in cands]
        kernel.autotune_table = format_table(kernel.autotune_results, device)
        if self.progress:
            sys.stderr.write(kernel.autotune_table + "\n")
            sys.stderr.write(f"autotune {self.name}: best {best.config} at {best.latency:.4f} ms "
                             f"({len(timed)} of {len(cands)} configurations timed)\n")
        return kernel

    # -- the disk cache ------------------------------------------------------------------------
    def _disk_key(self, given: dict, configs: list[dict]) -> str:
        from tegula.target import parse_target

        return result_cache.result_key(self.jit_function.func, {k: repr(v) for k, v in given.items()},
                                       configs, parse_target(self.jit_function.target))

    def _from_disk(self, given: dict, configs: list[dict]) -> Any:
        hit = result_cache.load(self._disk_key(given, configs))
        if hit is None or not 0 <= hit["index"] < len(configs):
            return None
        config = configs[hit["index"]]
        if hit.get("config_repr") != repr(config):
            return None
        try:
            kernel = self.jit_function(**given, **config)
        except Exception:  # the cached choice does not build any more: tune again
            return None
        kernel.config = dict(config)
        kernel.latency = hit.get("latency")
        kernel.autotune_results = hit.get("results", [])
        kernel.autotune_table = format_table(kernel.autotune_results) if kernel.autotune_results else ""
        return kernel

    # -- tuning --------------------------------------------------------------------------------
    def _tune(self, given: dict, configs: list[dict]) -> Any:
        from tegula.runtime.kernel import JITKernel

        jf = self.jit_function
        bar = Progress(f"autotune {self.name}", len(configs), self.progress)
        cands = [Candidate(i, c) for i, c in enumerate(configs)]

        def skip(c: Candidate, why: str) -> None:
            c.error = why
            bar.note(f"autotune {self.name}: skipped {c.config}: {why}")

        # the frontend runs here (it is not thread-safe); lowering and compiling in the pool
        bar.start("building")
        for c in cands:
            try:
                c.func = jf.get_tir(**given, **c.config)
            except Exception as e:
                skip(c, _reason(e))
        ready = [c for c in cands if c.error is None]
        workers = self.max_workers or min(len(ready) or 1, os.cpu_count() or 4, 16)
        with cf.ThreadPoolExecutor(max_workers=workers) as pool:
            futures = {pool.submit(JITKernel, c.func, jf.out_idx, jf.target, jf.pass_configs,
                                   jf.pipeline): c
                       for c in ready}
            bar.done = len(cands) - len(ready)
            for fut in cf.as_completed(futures):
                c = futures[fut]
                try:
                    c.kernel = fut.result()
                    c.kernel.config = dict(c.config)
                except Exception as e:
                    skip(c, _reason(e))
                bar.step()

        # checks and timings one at a time, so that kernels do not compete for the device
        bar.start("timing")
        inputs = _Inputs(self.supply_prog, self.cache_input_tensors)
        reference = _Reference(self.ref_prog, self.cache_input_tensors)
        for c in cands:
            if c.kernel is not None:
                try:
                    supply = functools.partial(inputs.get, c.kernel)
                    if self.ref_prog is not None and not self.skip_check:
                        check(c.kernel, supply, reference.get, self.rtol, self.atol, self.max_mismatched_ratio)
                    c.latency = measure(c.kernel, supply, self.warmup, self.rep)
                except AssertionError as e:
                    skip(c, f"wrong results: {_reason(e).split(': ', 1)[-1]}")
                except Exception as e:
                    skip(c, _reason(e))
            bar.step()
        bar.close()

        kernel = self._pick(cands)
        best = next(c for c in cands if c.kernel is kernel)
        result_cache.store(self._disk_key(given, configs), {
            "index": best.index, "config": best.config, "config_repr": repr(best.config),
            "latency": best.latency, "results": kernel.autotune_results})
        return kernel


class _Inputs:
    """Input tensors for a kernel: made once and shared by every configuration when ``shared``
    (and the inputs' shapes and dtypes agree), else fresh for each kernel."""

    def __init__(self, supply_prog: Optional[Callable], shared: bool):
        self.supply_prog, self.shared = supply_prog, shared
        self.sig: Any = None
        self.values: Optional[list] = None
        self.kernel: Any = None

    @staticmethod
    def _signature(kernel: Any) -> tuple:
        ps = [kernel.func.params[i] for i in kernel.inputs]
        return tuple((p.name, str(getattr(p, "shape", "")), str(getattr(p, "dtype", ""))) for p in ps)

    def get(self, kernel: Any) -> list:
        given = _TUNE_INPUTS.get()
        if given is not None:
            return given
        sig = self._signature(kernel)
        if self.values is not None and (self.kernel is kernel or (self.shared and sig == self.sig)):
            return self.values
        if self.supply_prog is not None:
            self.values = list(self.supply_prog([kernel.func.params[i] for i in kernel.inputs]))
        else:
            self.values = kernel.get_profiler().make_inputs()
        self.sig, self.kernel = sig, kernel
        return self.values


class _Reference:
    """``ref_prog`` outputs, computed once per set of inputs when those are shared."""

    def __init__(self, ref_prog: Optional[Callable], shared: bool):
        self.ref_prog, self.shared = ref_prog, shared
        self._for: Optional[list] = None
        self._out: Any = None

    def get(self, inputs: list) -> Any:
        if self.shared and self._for is inputs:
            return self._out
        assert self.ref_prog is not None
        self._out = self.ref_prog(*inputs)
        self._for = inputs
        return self._out


def autotune(func: Optional[Callable] = None, *, configs: Any = None, warmup: float = 25,
             rep: float = 100, timeout: Optional[float] = None, ref_prog: Optional[Callable] = None,
             supply_prog: Optional[Callable] = None, rtol: float = 1e-2, atol: float = 1e-2,
             max_mismatched_ratio: float = 0.01, skip_check: bool = False,
             manual_check_prog: Optional[Callable] = None, cache_input_tensors: bool = True,
             max_workers: Optional[int] = None, progress: bool = True) -> Any:
    """Decorator over a ``@tegula.jit`` factory (or a plain factory, jitted with defaults), or
    over an eager ``@tegula.jit`` function: calling that with its tensors (and without any tuned
    argument) builds every configuration for those tensors, checks and times each on them (or on
    the inputs of an enclosing :func:`set_autotune_inputs`), and returns the best one's outputs;
    the choice is kept per argument shapes for later calls.

    ``configs``: a list of dicts of factory keyword arguments, or a function of the call's
    arguments returning one. ``ref_prog(*inputs)`` returns the expected output(s), compared with
    ``rtol`` / ``atol`` (a fraction ``max_mismatched_ratio`` of elements may differ) unless
    ``skip_check``. ``supply_prog(params)`` makes the inputs instead of the profiler (``params``:
    the input Buffers). ``cache_input_tensors``: one set of inputs (and reference outputs) for
    every configuration. ``max_workers``: threads that build kernels. ``timeout`` and
    ``manual_check_prog`` are accepted for TileLang compatibility and not used. Raises
    ArgumentError for bad configs; TegulaError when no configuration survives.
    """
    def deco(f: Callable) -> AutoTuneFunction:
        from tegula.jit import JITFunction, jit

        jf = f if isinstance(f, JITFunction) else jit(f)
        return AutoTuneFunction(jf, configs, warmup, rep, ref_prog, supply_prog, rtol, atol,
                                max_mismatched_ratio, skip_check, cache_input_tensors, max_workers,
                                progress)

    return deco if func is None else deco(func)
