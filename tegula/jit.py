"""``tegula.jit`` and ``tegula.compile``: from a kernel function to a callable :class:`JITKernel`.

Two styles, as in TileLang:

- **lazy**: ``@tegula.jit(out_idx=[-1])`` on a factory that returns a ``@T.prim_func``. Calling the
  factory builds (once per distinct argument tuple) and returns a ``JITKernel``.
- **eager**: ``@tegula.jit`` on a function whose body declares its tensors (``A: T.Tensor(...)``),
  allocates outputs with ``T.empty`` and returns them. Calling it with tensors compiles a version
  specialized on the non-tensor arguments and on the ``T.const`` shape symbols, runs it and returns
  the outputs; ``f.compile(M=..., block_M=...)`` builds a ``JITKernel`` ahead of time.
"""
from __future__ import annotations

import ast
import difflib
import functools
import inspect
from typing import Any, Callable, Mapping, Optional, Sequence, Union

from tegula.errors import ArgumentError, KernelTypeError
from tegula.passconfig import split_flags
from tegula.ir.buffer import Buffer
from tegula.ir.stmt import PrimFunc
from tegula.language.parser import Source
from tegula.language.prim_func import tensor_params, trace_eager
from tegula.runtime import args as A
from tegula.runtime import compiled
from tegula.runtime.kernel import JITKernel


def compile(func: PrimFunc, out_idx: Union[None, int, Sequence[int]] = None, target: Any = "auto",
            pass_configs: Optional[dict] = None, execution_backend: Any = None,
            verbose: bool = False, target_host: Any = None, pipeline: Any = None,
            compile_flags: Any = None, workspace_idx: Union[None, int, Sequence[int]] = None,
            platform: Any = None) -> JITKernel:
    """Build ``func`` for ``target``; ``out_idx`` names the parameters the kernel allocates.

    ``pipeline`` (a :class:`tegula.transform.Pipeline`, e.g. ``pipeline_for(target)`` with user
    passes inserted) replaces the target's own; the disk cache keys on it. ``compile_flags`` (a
    string or a list) are extra CUDA compiler options, as the ``tl.device_compile_flags`` pass
    config gives them; ``workspace_idx`` (TileLang-Ascend) names parameters the runtime allocates
    and the caller neither passes nor gets back (GM workspaces); ``execution_backend``,
    ``verbose``, ``target_host`` and ``platform`` change nothing."""
    if not isinstance(func, PrimFunc):
        raise KernelTypeError(f"tegula.compile takes a @T.prim_func, got {type(func).__name__}",
                              hint="decorate the kernel function with @T.prim_func")
    return JITKernel(func, out_idx, target, _with_flags(pass_configs, compile_flags), pipeline,
                     workspace_idx=workspace_idx)


def _with_flags(pass_configs: Optional[dict], compile_flags: Any) -> Optional[dict]:
    """``pass_configs`` with ``compile_flags`` appended to its ``tl.device_compile_flags``."""
    flags = split_flags(compile_flags)
    if not flags:
        return pass_configs
    if pass_configs is not None and not isinstance(pass_configs, Mapping):
        return pass_configs  # not a dict: check_pass_configs reports it when the kernel is built
    cfg = dict(pass_configs or {})
    cfg["tl.device_compile_flags"] = split_flags(cfg.get("tl.device_compile_flags"),
                                                 "tl.device_compile_flags") + flags
    return cfg


# TileLang's compile options. ``f.compile(...)`` and ``f.get_kernel_source(...)`` take them by
# keyword next to the function's own arguments (a parameter of that name stays the parameter):
# ``target``, ``pass_configs``, ``compile_flags``, ``pipeline`` and (lazy style) ``out_idx``
# replace the decorator's for that build; the others are accepted and change nothing.
COMPILE_OPTIONS = ("target", "pass_configs", "compile_flags", "pipeline", "out_idx",
                   "execution_backend", "target_host", "verbose", "debug_root_path", "platform")


def _is_eager(func: Callable) -> bool:
    src = Source.of(func)
    return any(isinstance(n, ast.With) for n in src.tree.body) or bool(tensor_params(func))


def _freeze(x: Any) -> Any:
    """A hashable key for a compile-time argument."""
    if isinstance(x, (list, tuple)):
        return (type(x).__name__,) + tuple(_freeze(v) for v in x)
    if isinstance(x, dict):
        return ("dict",) + tuple(sorted((k, _freeze(v)) for k, v in x.items()))
    try:
        hash(x)
        return x
    except TypeError:
        return ("id", id(x))


class JITFunction:
    """What ``@tegula.jit`` returns; see the module docstring for the two styles."""

    def __init__(self, func: Callable, out_idx: Any, target: Any, pass_configs: Optional[dict],
                 pipeline: Any = None, compile_flags: Any = None, workspace_idx: Any = None):
        self.func = func
        self.workspace_idx = workspace_idx
        self.pipeline = pipeline
        self.out_idx = out_idx
        self.target = target
        self.pass_configs = _with_flags(pass_configs, compile_flags)
        self.eager = _is_eager(func)
        self.signature = inspect.signature(func)
        self.tensor_names = tensor_params(func) if self.eager else []
        self._cache: dict = {}
        self._route_key = compiled.register(self)  # names its op inside torch.compile
        functools.update_wrapper(self, func)

    @property
    def __jit_impl__(self) -> "JITFunction":
        """TileLang's handle on the jit object behind the decorated function (itself here):
        ``f.__jit_impl__.target``, ``.out_idx``, ``.pass_configs``."""
        return self

    # -- compile options given by keyword ----------------------------------------------------
    def _options(self, kwargs: dict, where: str) -> tuple[dict, dict]:
        """``kwargs`` without the compile options (:data:`COMPILE_OPTIONS`), and the settings
        of the build: ``target``, ``pass_configs`` (the decorator's, updated by the given ones,
        with ``compile_flags``), ``pipeline`` and ``out_idx``."""
        params = self.signature.parameters
        given = {n: v for n, v in kwargs.items() if n in COMPILE_OPTIONS and n not in params}
        rest = {n: v for n, v in kwargs.items() if n not in given}
        if self.eager and given.get("out_idx") is not None:
            raise ArgumentError(f"{self.func.__name__}.{where}: out_idx is for lazy-style kernels; an "
                                "eager kernel returns the tensors its body allocates with T.empty",
                                hint="leave out_idx out, or return the outputs from the body")
        cfg = self.pass_configs
        if given.get("pass_configs"):
            cfg = {**(cfg or {}), **given["pass_configs"]} if isinstance(given["pass_configs"], Mapping) \
                else given["pass_configs"]  # not a dict: reported as for the decorator's
        settings = {"target": given.get("target", self.target),
                    "pass_configs": _with_flags(cfg, given.get("compile_flags")),
                    "pipeline": given.get("pipeline", self.pipeline),
                    "out_idx": given.get("out_idx", self.out_idx), "workspace_idx": self.workspace_idx}
        return rest, settings

    def _defaults(self) -> dict:
        return {"target": self.target, "pass_configs": self.pass_configs,
                "pipeline": self.pipeline, "out_idx": self.out_idx, "workspace_idx": self.workspace_idx}

    @staticmethod
    def _build(func: PrimFunc, out_idx: Any, settings: dict) -> JITKernel:
        return JITKernel(func, out_idx, settings["target"], settings["pass_configs"], settings["pipeline"],
                         workspace_idx=settings.get("workspace_idx"))

    def _check_consts(self, consts: dict, declared: Sequence[str], where: str) -> None:
        """An ArgumentError for a keyword that is no parameter, T.const symbol or option."""
        unknown = [n for n in consts if n not in declared]
        if not unknown:
            return
        name = unknown[0]
        params = [n for n in self.signature.parameters]
        close = difflib.get_close_matches(name, params + list(declared) + list(COMPILE_OPTIONS), n=1)
        raise ArgumentError(
            f"{self.func.__name__}.{where}: keyword '{name}' is not a parameter of "
            f"{self.func.__name__}, a T.const symbol of its body or a compile option",
            hint=(f"did you mean '{close[0]}'? " if close else "") +
                 f"parameters: {', '.join(params) or 'none'}; T.const symbols: "
                 f"{', '.join(declared) or 'none'}; compile options: {', '.join(COMPILE_OPTIONS)}")

    # -- lazy ---------------------------------------------------------------------------------
    def _lazy(self, args: tuple, kwargs: dict, settings: Optional[dict] = None) -> JITKernel:
        try:
            ba = self.signature.bind(*args, **kwargs)
            ba.apply_defaults()
            key = _freeze(dict(ba.arguments))
        except TypeError as e:
            raise ArgumentError(f"{self.func.__name__}(): {e}") from None
        if settings is not None and settings != self._defaults():
            key = (key, _freeze(settings))
        k = self._cache.get(key)
        if k is None:
            prim = self.func(*args, **kwargs)
            if not isinstance(prim, PrimFunc):
                raise KernelTypeError(
                    f"@tegula.jit factory '{self.func.__name__}' returned {type(prim).__name__}, "
                    "not a @T.prim_func", hint="return the @T.prim_func defined inside the factory")
            settings = settings or self._defaults()
            k = self._build(prim, settings["out_idx"], settings)
            self._cache[key] = k
        return k

    # -- eager --------------------------------------------------------------------------------
    def _consts_apart(self, kwargs: dict) -> tuple[dict, dict]:
        """(the keywords that name parameters, the others: ``T.const`` values of an eager call)."""
        params = self.signature.parameters
        return ({n: v for n, v in kwargs.items() if n in params},
                {n: v for n, v in kwargs.items() if n not in params})

    def _split(self, args: tuple, kwargs: dict, partial: bool = False) -> tuple[dict, dict]:
        """Tensor and other arguments; with ``partial`` tensors may be left out (their
        annotations must then have static shapes)."""
        try:
            ba = (self.signature.bind_partial if partial else self.signature.bind)(*args, **kwargs)
        except TypeError as e:
            raise ArgumentError(f"{self.func.__name__}(): {e}") from None
        ba.apply_defaults()
        tensors = {n: ba.arguments[n] for n in self.tensor_names if n in ba.arguments}
        others = {n: v for n, v in ba.arguments.items() if n not in self.tensor_names}
        for n, v in others.items():
            if A.is_tensor_like(v):
                raise ArgumentError(f"argument '{n}' is a tensor, but the body does not declare it",
                                    hint=f"add `{n}: T.Tensor(shape, dtype)` at the top of the body")
        return tensors, others

    def _eager_kernel(self, tensors: dict, others: dict, consts: dict,
                      settings: Optional[dict] = None, where: str = "__call__()") -> JITKernel:
        for n, t in tensors.items():
            if not A.is_tensor_like(t):
                raise ArgumentError(f"argument '{n}': expected a tensor, got {type(t).__name__}")
        key = (_freeze(others), _freeze(consts),
               tuple((n, str(t.dtype), len(t.shape)) for n, t in tensors.items()))
        if settings is not None and settings != self._defaults():
            key = key + (_freeze(settings),)
        for constraints, kernel in self._cache.get(key, ()):
            if all(int(tensors[n].shape[d]) == v for (n, d), v in constraints.items()):
                return kernel
        info = {n: (tuple(int(s) for s in t.shape), str(t.dtype)) for n, t in tensors.items()}
        tr = trace_eager(self.func, others, info, consts)
        self._check_consts(consts, tr.const_names, where)
        kernel = self._build(tr.func, tr.out_idx, settings or self._defaults())
        constraints = {}
        for p in tr.func.params:
            if isinstance(p, Buffer) and p.name in tensors:
                for d, ext in enumerate(p.shape):
                    if isinstance(ext, int):
                        constraints[(p.name, d)] = ext
        self._cache.setdefault(key, []).append((constraints, kernel))
        return kernel

    def compile(self, **kwargs: Any) -> JITKernel:
        """Build ahead of time. Eager style: from the non-tensor arguments and the ``T.const``
        values by name; lazy style: from the factory's arguments. Either takes the compile
        options (:data:`COMPILE_OPTIONS`) too, e.g. ``target="cuda:sm_80"``. A keyword that is
        none of these is an ArgumentError naming it and the names there are."""
        kwargs, settings = self._options(kwargs, "compile()")
        if not self.eager:
            return self._lazy((), kwargs, settings)
        return self._compile(kwargs, settings)

    def _compile(self, kwargs: dict, settings: dict) -> JITKernel:
        params = self.signature.parameters
        others, consts = {}, {}
        for n, v in kwargs.items():
            if n in self.tensor_names:
                raise ArgumentError(f"compile(): '{n}' is a tensor parameter; give shape symbols instead")
            (others if n in params else consts)[n] = v
        for n, p in params.items():
            if n not in self.tensor_names and n not in others:
                if p.default is inspect.Parameter.empty:
                    raise ArgumentError(f"compile(): missing a value for parameter '{n}'")
                others[n] = p.default
        key = ("compiled", _freeze(others), _freeze(consts), _freeze(settings))
        k = self._cache.get(key)
        if k is None:
            tr = trace_eager(self.func, others, {n: None for n in self.tensor_names}, consts)
            self._check_consts(consts, tr.const_names, "compile()")
            k = self._build(tr.func, tr.out_idx, settings)
            self._cache[key] = k
        return k

    def get_tir(self, *args: Any, **kwargs: Any) -> PrimFunc:
        """The PrimFunc for these arguments, without compiling it. Eager style: pass the tensors,
        or leave them out and give the ``T.const`` shape symbols by name (``M=1024``) as
        :meth:`compile` takes them; tensors with static annotations may be left out too."""
        if not self.eager:
            prim = self.func(*args, **kwargs)
            if not isinstance(prim, PrimFunc):
                raise KernelTypeError(f"@tegula.jit factory '{self.func.__name__}' returned "
                                      f"{type(prim).__name__}, not a @T.prim_func")
            return prim
        params = self.signature.parameters
        consts = {n: v for n, v in kwargs.items() if n not in params}
        kwargs = {n: v for n, v in kwargs.items() if n in params}
        tensors, others = self._split(args, kwargs, partial=True)
        info = {n: (tuple(int(x) for x in tensors[n].shape), str(tensors[n].dtype)) if n in tensors else None
                for n in self.tensor_names}
        tr = trace_eager(self.func, others, info, consts)
        self._check_consts(consts, tr.const_names, "get_tir()")
        return tr.func

    def get_kernel_source(self, *args: Any, **kwargs: Any) -> str:
        """The source of the kernel these arguments build, without running it. Lazy style: the
        factory's arguments; eager style: the call's tensors and arguments, or (no tensors) the
        shape symbols and arguments by name, as :meth:`compile` takes them. The compile options
        (``target=`` ...) are taken as :meth:`compile` takes them."""
        kwargs, settings = self._options(kwargs, "get_kernel_source()")
        if not self.eager:
            return self._lazy(args, kwargs, settings).get_kernel_source()
        try:
            named = dict(self.signature.bind_partial(*args).arguments)
        except TypeError as e:
            raise ArgumentError(f"{self.func.__name__}.get_kernel_source(): {e}") from None
        named.update(kwargs)
        if not any(n in named for n in self.tensor_names):  # ahead of time: shape symbols by name
            return self._compile(named, settings).get_kernel_source()
        named, consts = self._consts_apart(named)
        tensors, others = self._split((), named)
        return self._eager_kernel(tensors, others, consts, settings, "get_kernel_source()").get_kernel_source()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Lazy style: the kernel the factory's arguments build. Eager style: build (once per
        argument shapes and values) and run; keywords that are no parameter give ``T.const``
        symbols their values (``f(A, B, N=1024)``), as TileLang's eager call takes them.
        Under torch.compile the call becomes a custom op of the graph (``tegula.torch``)."""
        if compiled.tracing():
            return compiled.route(self, args, kwargs)
        return self._call(args, kwargs)

    def _call(self, args: tuple, kwargs: dict) -> Any:
        if not self.eager:
            return self._lazy(args, kwargs)
        if compiled.fake(args) or compiled.fake(kwargs.values()):  # traced outside torch.compile
            return compiled.route(self, args, kwargs)
        kwargs, consts = self._consts_apart(kwargs)
        tensors, others = self._split(args, kwargs)
        kernel = self._eager_kernel(tensors, others, consts)
        return kernel(*[tensors[n] for n in self.tensor_names])


# TileLang's names for these objects (``from tilelang.jit import JITImpl, JITKernel``)
JITImpl = JITFunction
__all__ = ["jit", "compile", "JITFunction", "JITImpl", "JITKernel"]


def jit(func: Optional[Callable] = None, *, out_idx: Union[None, int, Sequence[int]] = None,
        target: Any = "auto", pass_configs: Optional[dict] = None, execution_backend: Any = None,
        verbose: bool = False, debug_root_path: Any = None, target_host: Any = None,
        pipeline: Any = None, compile_flags: Any = None,
        workspace_idx: Union[None, int, Sequence[int]] = None, platform: Any = None) -> Any:
    """Decorator, with or without arguments: ``@tegula.jit`` or ``@tegula.jit(out_idx=[-1])``.

    ``pipeline``, ``compile_flags`` and ``workspace_idx`` are as for :func:`compile`: every
    kernel the function builds uses them."""
    if func is None:
        return lambda f: JITFunction(f, out_idx, target, pass_configs, pipeline, compile_flags, workspace_idx)
    return JITFunction(func, out_idx, target, pass_configs, pipeline, compile_flags, workspace_idx)
