"""The IR after every pass of a backend's pipeline, with pass names and times.

::

    import tegula.tools as tools
    tr = tools.trace(matmul, 1024, 1024, 1024, target="cuda:sm_90a")
    print(tr)                       # every step: name, time, IR, verifier problems
    tr["LowerTileOps"].ir           # the IR right after one pass
    print(tr.diff("input", "PipelineCopies"))

``trace`` takes a ``@T.prim_func`` (a PrimFunc), a built ``JITKernel``, a ``@tegula.jit`` function
or a plain factory returning a PrimFunc (then followed by the factory's arguments). Step 0 is the
tile-level IR the frontend produced (named ``input``); step ``i`` is the IR after the ``i``-th pass
of :func:`tegula.backends.cuda.pipeline.passes`. On the ``cpu`` target (the interpreter runs the
tile IR as is) the trace holds step 0 only.

With ``TEGULA_TRACE=DIR`` every kernel lowered for CUDA writes its trace to ``DIR`` as text and as
an HTML page (:func:`dump_lowering`; kernels loaded from the disk cache are not lowered again, so
set ``TEGULA_DISABLE_CACHE=1`` as well to trace every build).
"""
from __future__ import annotations

import difflib
import hashlib
import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Optional, Union

from tegula.errors import ConfigError, KernelTypeError
from tegula.ir.stmt import PrimFunc
from tegula.target import Target, parse_target

INPUT = "input"
DEFAULT_TARGET = "cuda:sm_90a"

Point = Union[str, int]


@dataclass
class Step:
    """One point of a trace: the IR after the pass ``name`` (or the ``input`` tile IR)."""

    name: str
    seconds: float
    ir: str
    problems: list[str] = field(default_factory=list)
    func: Optional[PrimFunc] = field(default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        """True when the verifier found nothing wrong with this step's IR."""
        return not self.problems


class Trace(list):
    """The steps of one lowering, in order (a ``list`` of :class:`Step`).

    ``error`` holds the exception that stopped the pipeline, if any (the steps before it are
    kept). Index it by position or by pass name: ``tr[3]``, ``tr["LowerTileOps"]``.
    """

    def __init__(self, steps: Iterable[Step] = (), func_name: str = "", target: str = "",
                 error: Optional[BaseException] = None):
        super().__init__(steps)
        self.func_name = func_name
        self.target = target
        self.error = error

    def names(self) -> list[str]:
        """Step names in order, ``input`` first."""
        return [s.name for s in self]

    def index(self, point: Any, *args: Any) -> int:  # type: ignore[override]
        """Position of a step given by name (case-insensitive) or by position (negative counts
        from the end); raises ConfigError naming the steps when there is none."""
        if args or isinstance(point, Step):
            return super().index(point, *args)
        if isinstance(point, bool) or not isinstance(point, (int, str)):
            raise ConfigError(f"a trace point is a pass name or a position, got {point!r}")
        if isinstance(point, int):
            if -len(self) <= point < len(self):
                return point % len(self)
            raise ConfigError(f"trace point {point} is out of range: the trace has {len(self)} "
                              f"steps (0 = {INPUT} .. {len(self) - 1})")
        names = self.names()
        for i, n in enumerate(names):
            if n == point:
                return i
        for i, n in enumerate(names):
            if n.lower() == point.lower():
                return i
        close = difflib.get_close_matches(point, names, n=1)
        raise ConfigError(f"no pass named {point!r} in this trace",
                          hint=(f"did you mean {close[0]!r}? " if close else "")
                          + f"steps: {', '.join(names)}")

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, str):
            return super().__getitem__(self.index(key))
        return super().__getitem__(key)

    @property
    def total_seconds(self) -> float:
        return sum(s.seconds for s in self)

    @property
    def problems(self) -> list[str]:
        """Every verifier problem, prefixed by the step it was found in."""
        return [f"{s.name}: {p}" for s in self for p in s.problems]

    def diff(self, a: Point = INPUT, b: Point = -1, context: int = 3) -> str:
        """Unified diff of the IR from point ``a`` to point ``b`` (empty when they print alike)."""
        i, j = self.index(a), self.index(b)
        x, y = self[i], self[j]
        return "".join(difflib.unified_diff(
            x.ir.splitlines(keepends=True), y.ir.splitlines(keepends=True),
            fromfile=f"{self.func_name} @ [{i}] {x.name}", tofile=f"{self.func_name} @ [{j}] {y.name}",
            n=context))

    def timings(self) -> str:
        """A table of pass times in milliseconds."""
        width = max([len(n) for n in self.names()] + [4])
        rows = [f"{'#':>3}  {'pass':<{width}}  {'ms':>9}  lines  problems"]
        for i, s in enumerate(self):
            rows.append(f"{i:>3}  {s.name:<{width}}  {s.seconds * 1e3:>9.3f}  {s.ir.count(chr(10)) + 1:>5}"
                        f"  {len(s.problems)}")
        rows.append(f"     {'total':<{width}}  {self.total_seconds * 1e3:>9.3f}")
        return "\n".join(rows)

    def format(self, ir: bool = True) -> str:
        """The whole trace as text: a header per step, its IR and problems, then the timings."""
        out = [f"# trace of '{self.func_name}' for {self.target}: {len(self)} steps"]
        for i, s in enumerate(self):
            out.append(f"\n== [{i}] {s.name}  ({s.seconds * 1e3:.3f} ms) ==")
            if ir:
                out.append(s.ir.rstrip("\n"))
            out.extend(f"!! verifier: {p}" for p in s.problems)
        if self.error is not None:
            out.append(f"\n!! the pipeline stopped: {type(self.error).__name__}: {self.error}")
        out.append("\n" + self.timings())
        return "\n".join(out)

    def __str__(self) -> str:
        return self.format()

    def __repr__(self) -> str:
        return f"<Trace {self.func_name} {self.target}: {', '.join(self.names())}>"

    def to_html(self, title: Optional[str] = None) -> str:
        """One self-contained HTML page (see :mod:`tegula.tools.html`)."""
        from tegula.tools.html import trace_to_html

        return trace_to_html(self, title)


# -- what the user hands us ------------------------------------------------------------------

def resolve(obj: Any, args: tuple = (), kwargs: Optional[dict] = None
            ) -> tuple[PrimFunc, Optional[Target], Optional[dict]]:
    """``(func, target, pass_configs)`` of a PrimFunc, JITKernel, ``@tegula.jit`` function or
    factory called with ``args``; target and pass_configs are those the object carries, if any."""
    from tegula.jit import JITFunction
    from tegula.runtime.kernel import JITKernel

    kwargs = kwargs or {}
    if isinstance(obj, PrimFunc):
        if args or kwargs:
            raise KernelTypeError("a @T.prim_func takes no factory arguments here",
                                  hint="pass the arguments to the factory that builds it")
        return obj, None, None
    if isinstance(obj, JITKernel):
        return obj.func, obj.target, obj.pass_configs
    if isinstance(obj, JITFunction):
        return obj.get_tir(*args, **kwargs), None, obj.pass_configs
    target_attr = getattr(obj, "jit_function", None)  # an autotuned function: its jit function
    if isinstance(target_attr, JITFunction):
        return resolve(target_attr, args, kwargs)
    if callable(obj):
        made = obj(*args, **kwargs)
        if isinstance(made, (PrimFunc, JITKernel)):
            return resolve(made)
        raise KernelTypeError(f"'{getattr(obj, '__name__', obj)}' returned {type(made).__name__}, "
                              "not a @T.prim_func or a JITKernel")
    raise KernelTypeError(f"cannot trace a {type(obj).__name__}",
                          hint="pass a @T.prim_func, a JITKernel, a @tegula.jit function or a factory")


def _cuda_target(t: Target) -> Target:
    from tegula.backends.cuda.jit import resolve_arch

    return Target("cuda", resolve_arch(t))


def pipeline_of(target: Target, pass_configs: dict) -> list[tuple[str, Callable[[PrimFunc], PrimFunc]]]:
    """The passes a kernel goes through for ``target``: none for the interpreter."""
    if target.kind == "cuda":
        from tegula.backends.cuda.pipeline import passes

        return passes(_cuda_target(target), pass_configs)
    if target.kind in ("ascend-emu", "ascend-pto"):
        from tegula.backends.npu.pipeline import passes as npu_passes

        return npu_passes(target, pass_configs)
    return []


def _check(func: PrimFunc) -> list[str]:
    from tegula.ir.verify import well_formed

    try:
        return well_formed(func)
    except Exception as e:  # the verifier itself failed on this IR: report, do not abort
        return [f"the verifier could not check this IR: {type(e).__name__}: {e}"]


def run_passes(func: PrimFunc, target: Target, pass_configs: dict,
               pipeline: Optional[list] = None, stop_on_error: bool = True) -> tuple[Trace, PrimFunc]:
    """Apply the pipeline to ``func`` recording each step; returns ``(trace, final func)``.

    A pass that raises ends the trace (``trace.error``); with ``stop_on_error`` the error is
    raised after being recorded.
    """
    steps = Trace(func_name=func.name, target=str(target))
    steps.append(Step(INPUT, 0.0, func.script(), _check(func), func))
    for name, fn in (pipeline if pipeline is not None else pipeline_of(target, pass_configs)):
        t0 = time.perf_counter()
        try:
            func = fn(func)
        except Exception as e:
            steps.error = e
            if stop_on_error:
                raise
            break
        dt = time.perf_counter() - t0
        steps.append(Step(name, dt, func.script(), _check(func), func))
    return steps, func


def trace(kernel_or_func: Any, *args: Any, target: Any = None, pass_configs: Optional[dict] = None,
          **kwargs: Any) -> Trace:
    """The IR after every pass, in order, with names and times.

    ``kernel_or_func``: a PrimFunc, a JITKernel, a ``@tegula.jit`` function or a factory (then
    ``args`` / ``kwargs`` are its arguments). ``target`` defaults to the JITKernel's own target
    when it is a CUDA one, else ``"cuda:sm_90a"``; ``"cpu"`` gives the tile IR only. A pass that
    raises (e.g. a ResourceError) stops the trace: the steps before it are kept and the error is in
    ``trace.error``. Raises KernelTypeError for something that is not a kernel.
    """
    from tegula.passconfig import check_pass_configs

    func, own_target, own_configs = resolve(kernel_or_func, args, kwargs)
    if target is None:
        target = own_target if own_target is not None and own_target.kind == "cuda" else DEFAULT_TARGET
    t = parse_target(target)
    if t.kind == "cuda":
        t = _cuda_target(t)
    cfg = check_pass_configs(pass_configs if pass_configs is not None else own_configs)
    tr, _ = run_passes(func, t, cfg, stop_on_error=False)
    return tr


def diff(kernel_or_func: Any, a: Point, b: Point, *args: Any, target: Any = None,
         pass_configs: Optional[dict] = None, context: int = 3, **kwargs: Any) -> str:
    """Unified diff of the IR between two points of the pipeline (see :mod:`tegula.tools.diff`)."""
    from tegula.tools.diff import diff as _diff

    return _diff(kernel_or_func, a, b, *args, target=target, pass_configs=pass_configs,
                 context=context, **kwargs)


# -- TEGULA_TRACE ----------------------------------------------------------------------------

def dump(tr: Trace, directory: str) -> list[str]:
    """Write ``tr`` to ``directory`` as ``<name>-<hash>.trace.txt`` and ``.trace.html``; returns
    the paths. The hash is of the input IR and target, so distinct builds do not overwrite."""
    os.makedirs(directory, exist_ok=True)
    h = hashlib.sha256((tr.target + "\n" + (tr[0].ir if tr else "")).encode()).hexdigest()[:10]
    safe = "".join(c if c.isalnum() or c in "_-" else "_" for c in tr.func_name) or "kernel"
    base = os.path.join(directory, f"{safe}-{h}.trace")
    paths = []
    for ext, text in (("txt", tr.format()), ("html", tr.to_html())):
        path = f"{base}.{ext}"
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, path)
        paths.append(path)
    return paths


def dump_lowering(func: PrimFunc, target: Target, pass_configs: dict, directory: str) -> PrimFunc:
    """Lower ``func`` exactly as the CUDA pipeline does, writing its trace to ``directory``
    (also when a pass raises: then the partial trace is written and the error re-raised)."""
    from tegula.backends.cuda.pipeline import passes

    tr, out = run_passes(func, target, pass_configs, pipeline=passes(target, pass_configs),
                         stop_on_error=False)
    dump(tr, directory)
    if tr.error is not None:
        raise tr.error
    return out


# -- kernels named on the command line -------------------------------------------------------

def parse_sets(items: Iterable[str]) -> dict:
    """``["M=1024", "dtype=float16"]`` -> ``{"M": 1024, "dtype": "float16"}`` (values are Python
    literals when they parse as one, else strings)."""
    import ast

    out: dict = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip().isidentifier():
            raise ConfigError(f"--set takes NAME=VALUE, got {item!r}", hint="e.g. --set M=1024")
        try:
            out[key.strip()] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            out[key.strip()] = value
    return out


def _kernels_in(module: Any) -> dict[str, Any]:
    from tegula.jit import JITFunction

    found = {}
    for name, obj in vars(module).items():
        if isinstance(obj, (PrimFunc, JITFunction)) or isinstance(getattr(obj, "jit_function", None), JITFunction):
            found[name] = obj
    return found


def load_kernel(path: str, name: Optional[str] = None, sets: Optional[dict] = None) -> PrimFunc:
    """The PrimFunc that ``path`` (a Python file) defines: a ``@T.prim_func``, a ``@tegula.jit``
    function or a factory, picked by ``name`` when the file defines several, built with ``sets``
    as keyword arguments. Raises ConfigError naming the choices or the missing arguments."""
    import importlib.util
    import inspect
    import sys

    from tegula.jit import JITFunction

    path = os.path.abspath(path)
    if not os.path.isfile(path):
        raise ConfigError(f"no such file: {path}")
    mod_name = "_tegula_cli_" + hashlib.sha256(path.encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(mod_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(path))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(os.path.dirname(path))
    kernels = _kernels_in(module)
    if name is not None:
        if not hasattr(module, name):
            raise ConfigError(f"{os.path.basename(path)} defines no '{name}'",
                              hint=f"kernels found: {', '.join(kernels) or 'none'}")
        obj = getattr(module, name)
    elif len(kernels) == 1:
        obj = next(iter(kernels.values()))
    else:
        raise ConfigError(f"{os.path.basename(path)} defines "
                          + (f"several kernels ({', '.join(kernels)})" if kernels else "no kernel"),
                          hint="pick one with --kernel NAME (a @T.prim_func, a @tegula.jit function "
                               "or a factory)")
    sets = dict(sets or {})
    if isinstance(obj, PrimFunc):
        if sets:
            raise ConfigError("--set is for factories; this kernel is a @T.prim_func already")
        return obj
    obj = getattr(obj, "jit_function", obj)
    if not callable(obj):
        raise ConfigError(f"'{name}' is a {type(obj).__name__}, not a kernel")
    fn = obj.func if isinstance(obj, JITFunction) else obj
    sig = inspect.signature(fn)
    if isinstance(obj, JITFunction) and obj.eager:
        return obj.compile(**sets).func
    missing = [p for p, v in sig.parameters.items() if v.default is inspect.Parameter.empty
               and v.kind not in (v.VAR_POSITIONAL, v.VAR_KEYWORD) and p not in sets]
    if missing:
        raise ConfigError(f"{fn.__name__}{sig} needs a value for {', '.join(missing)}",
                          hint="pass them with --set, e.g. " + " ".join(f"--set {m}=..." for m in missing))
    func, _, _ = resolve(obj, (), sets)
    return func
