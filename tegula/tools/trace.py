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
of the target's pipeline (:func:`tegula.transform.pipeline_for`), or of ``pipeline=``. On the
``cpu`` target (the interpreter runs the tile IR as is) the trace holds step 0 and any user passes.

The trace is what the :class:`~tegula.transform.Record` instrument records while the pipeline
runs. With ``TEGULA_TRACE=DIR`` every kernel lowered for CUDA or ``cuda-emu`` writes its trace to
``DIR`` as text and as an HTML page (the :class:`~tegula.transform.Dump` instrument; kernels loaded
from the disk cache are not lowered again, so set ``TEGULA_DISABLE_CACHE=1`` as well to trace
every build).
"""
from __future__ import annotations

import hashlib
import os
from typing import Any, Iterable, NamedTuple, Optional

from tegula.errors import ConfigError, KernelTypeError
from tegula.ir.stmt import PrimFunc
from tegula.target import Target, kind_of, parse_target
from tegula.transform.instruments import Record
from tegula.transform.pipeline import Pipeline, check_pipeline
from tegula.transform.trace import INPUT, Point, Step, Trace, dump

__all__ = ["trace", "resolve", "Trace", "Step", "INPUT", "Point", "dump", "load_kernel",
           "parse_sets", "parse_args", "split_spec", "DEFAULT_TARGET"]

DEFAULT_TARGET = "cuda:sm_90a"


# -- what the user hands us ------------------------------------------------------------------

class Resolved(NamedTuple):
    """A kernel to trace and what it carries: target, pass configs and pipeline (None if none)."""

    func: PrimFunc
    target: Optional[Target]
    pass_configs: Optional[dict]
    pipeline: Optional[Pipeline]


def resolve(obj: Any, args: tuple = (), kwargs: Optional[dict] = None) -> Resolved:
    """The PrimFunc of a PrimFunc, JITKernel, ``@tegula.jit`` function or factory called with
    ``args``, with the target, pass configs and pipeline the object carries, if any."""
    from tegula.jit import JITFunction
    from tegula.runtime.kernel import JITKernel

    kwargs = kwargs or {}
    if isinstance(obj, PrimFunc):
        if args or kwargs:
            raise KernelTypeError("a @T.prim_func takes no factory arguments here",
                                  hint="pass the arguments to the factory that builds it")
        return Resolved(obj, None, None, None)
    if isinstance(obj, JITKernel):
        return Resolved(obj.func, obj.target, obj.pass_configs, obj.pipeline)
    if isinstance(obj, JITFunction):
        return Resolved(obj.get_tir(*args, **kwargs), None, obj.pass_configs, obj.pipeline)
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


def pipeline_to_trace(r: Resolved, target: Any, pass_configs: Optional[dict],
                      pipeline: Optional[Pipeline]) -> tuple[PrimFunc, Pipeline]:
    """The function and the pipeline a trace of ``r`` runs: ``target`` defaults to the one
    ``r`` carries when that target has a lowering pipeline, else :data:`DEFAULT_TARGET`;
    ``pipeline`` to the one ``r`` was built with, when it is for that target."""
    from tegula.passconfig import check_pass_configs

    if target is None:
        own = r.target
        target = own if own is not None and kind_of(own).pipeline is not None else DEFAULT_TARGET
    t = parse_target(target)
    cfg = check_pass_configs(pass_configs if pass_configs is not None else r.pass_configs)
    if pipeline is None and r.pipeline is not None and t == r.target:
        pipeline = r.pipeline
    return r.func, check_pipeline(pipeline, t, cfg)


def trace(kernel_or_func: Any, *args: Any, target: Any = None, pass_configs: Optional[dict] = None,
          pipeline: Optional[Pipeline] = None, **kwargs: Any) -> Trace:
    """The IR after every pass, in order, with names and times.

    ``kernel_or_func``: a PrimFunc, a JITKernel, a ``@tegula.jit`` function or a factory (then
    ``args`` / ``kwargs`` are its arguments). ``target`` defaults to the JITKernel's own target
    when it has a lowering pipeline (``cuda``, ``cuda-emu``), else ``"cuda:sm_90a"``; ``"cpu"``
    gives the tile IR (and what user passes of ``pipeline`` do to it). ``pipeline`` defaults to the
    kernel's own, else the target's. A pass that raises (e.g. a ResourceError) stops the trace:
    the steps before it are kept and the error is in ``trace.error``. Raises KernelTypeError for
    something that is not a kernel.
    """
    func, p = pipeline_to_trace(resolve(kernel_or_func, args, kwargs), target, pass_configs, pipeline)
    rec = Record()
    try:
        p.run(func, instruments=[rec])
    except Exception:  # recorded in the trace: the steps before it are what the user looks at
        pass
    return rec.trace


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


def parse_args(tokens: Iterable[str]) -> tuple[tuple, dict]:
    """``["1024", "512", "block_M=64"]`` -> ``((1024, 512), {"block_M": 64})``: a factory's
    positional arguments, then keywords (values are Python literals when they parse, else strings)."""
    import ast

    args: list = []
    kwargs: dict = {}
    for tok in tokens:
        key, eq, _ = tok.partition("=")
        if eq and key.strip().isidentifier():
            kwargs.update(parse_sets([tok]))
            continue
        if kwargs:
            raise ConfigError(f"--args: positional value {tok!r} after a keyword",
                              hint="give positional values first: --args 1024 1024 block_M=64")
        try:
            args.append(ast.literal_eval(tok))
        except (ValueError, SyntaxError):
            args.append(tok)
    return tuple(args), kwargs


def split_spec(spec: str) -> tuple[str, Optional[str]]:
    """``"examples/gemm.py:matmul"`` -> ``("examples/gemm.py", "matmul")``; a spec without a
    ``:NAME`` tail (or whose tail is no identifier, as in ``C:\\x.py``) is the file alone."""
    path, colon, name = spec.rpartition(":")
    if colon and name.isidentifier() and path:
        return path, name
    return spec, None


def load_kernel(path: str, name: Optional[str] = None, sets: Optional[dict] = None,
                args: tuple = ()) -> PrimFunc:
    """The PrimFunc that ``path`` (a Python file) defines: a ``@T.prim_func``, a ``@tegula.jit``
    function or a factory, picked by ``name`` when the file defines several, built with ``args``
    (positional) and ``sets`` (keywords). Raises ConfigError naming the choices or the missing
    arguments."""
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
                          hint="pick one with FILE:NAME or --kernel NAME (a @T.prim_func, a @tegula.jit function "
                               "or a factory)")
    sets = dict(sets or {})
    if isinstance(obj, PrimFunc):
        if sets or args:
            raise ConfigError("--set is for factories; this kernel is a @T.prim_func already")
        return obj
    obj = getattr(obj, "jit_function", obj)
    if not callable(obj):
        raise ConfigError(f"'{name}' is a {type(obj).__name__}, not a kernel")
    fn = obj.func if isinstance(obj, JITFunction) else obj
    sig = inspect.signature(fn)
    if isinstance(obj, JITFunction) and obj.eager:
        if args:
            raise ConfigError("an eager @tegula.jit function takes its tensors positionally; "
                              "give shape symbols and parameters as NAME=VALUE")
        return obj.compile(**sets).func
    given = set(sets) | set(list(sig.parameters)[:len(args)])
    missing = [p for p, v in sig.parameters.items() if v.default is inspect.Parameter.empty
               and v.kind not in (v.VAR_POSITIONAL, v.VAR_KEYWORD) and p not in given]
    if missing:
        raise ConfigError(f"{fn.__name__}{sig} needs a value for {', '.join(missing)}",
                          hint="pass them with --set, e.g. " + " ".join(f"--set {m}=..." for m in missing))
    return resolve(obj, tuple(args), sets).func
