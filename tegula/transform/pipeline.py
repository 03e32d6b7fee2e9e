"""Pipelines as data: a target's passes as an immutable, ordered list that users print and edit.

::

    import tegula
    from tegula.transform import Pass, pipeline_for

    def count_copies(func):                   # a pass maps a PrimFunc to a PrimFunc
        ...
        return func

    p = pipeline_for("cuda:sm_80").insert_after("InferLayouts", Pass("CountCopies", count_copies))
    print(p)                                  # every pass with a one-line reason
    kernel = tegula.compile(matmul, target="cuda:sm_80", pipeline=p)

``input`` names the point before the first pass (step 0 of a trace), so
``insert_after("input", p)`` runs ``p`` first on every target, the interpreter's (empty) pipeline
included. Each target declares its pipeline as a table of :class:`PassSpec` rows (the CUDA one is
``tegula/backends/cuda/pipeline.py``); ``tegula.target`` says which table a target kind uses.
"""
from __future__ import annotations

import difflib
import hashlib
import inspect
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Optional, Sequence, Union

from tegula.errors import ConfigError, KernelTypeError
from tegula.ir.stmt import PrimFunc
from tegula.passconfig import check_pass_configs
from tegula.target import kind_of, load_ref, parse_target
from tegula.transform.instruments import default_instruments

INPUT = "input"
_PACKAGE = __name__.split(".")[0]


class Pass:
    """A named step of a pipeline: ``fn(func, **options)`` maps a PrimFunc to a PrimFunc.

    ``reason`` is the one line a pipeline's listing shows (default: the first line of ``fn``'s
    docstring). Raises ConfigError for a name that is not a non-empty string or an ``fn`` that
    cannot be called.
    """

    __slots__ = ("name", "fn", "_options", "reason")

    def __init__(self, name: str, fn: Callable[..., PrimFunc], reason: Optional[str] = None,
                 **options: Any):
        if not isinstance(name, str) or not name.strip() or name == INPUT:
            raise ConfigError(f"a pass name is a non-empty string other than {INPUT!r}, got {name!r}")
        if not callable(fn):
            raise ConfigError(f"pass '{name}': fn must be a function from PrimFunc to PrimFunc, "
                              f"got {type(fn).__name__}")
        doc = (inspect.getdoc(fn) or "").strip().splitlines()
        self.name = name
        self.fn = fn
        self._options = tuple(sorted(options.items()))
        self.reason = reason if reason is not None else (doc[0] if doc else "")

    @property
    def options(self) -> dict:
        """The keyword arguments ``fn`` is called with (a copy)."""
        return dict(self._options)

    def __call__(self, func: PrimFunc) -> PrimFunc:
        out = self.fn(func, **self.options)
        if not isinstance(out, PrimFunc):
            raise KernelTypeError(f"pass '{self.name}' returned {type(out).__name__}, not a PrimFunc",
                                  hint="a pass returns the function it was given or a new one; "
                                       "an analysis pass returns its input unchanged")
        return out

    @property
    def user_supplied(self) -> bool:
        """True when ``fn`` is not tegula's own code (then its source enters the cache key)."""
        mod = getattr(_unwrap(self.fn), "__module__", None) or ""
        return mod != _PACKAGE and not mod.startswith(_PACKAGE + ".")

    def fingerprint(self) -> str:
        """Name, options and what ``fn`` is: tegula's passes by qualified name (the compiler
        fingerprint covers their code), user passes by their source."""
        return "\n".join([self.name, repr(self._options), _describe_fn(self.fn, self.user_supplied)])

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Pass) and (self.name, self.fn, self._options) == \
            (other.name, other.fn, other._options)

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        opts = "".join(f", {k}={v!r}" for k, v in self._options)
        return f"Pass({self.name!r}, {getattr(self.fn, '__qualname__', repr(self.fn))}{opts})"


def _unwrap(fn: Any) -> Any:
    while hasattr(fn, "func") and not inspect.isfunction(fn):  # functools.partial and the like
        fn = fn.func
    return fn


def _describe_fn(fn: Any, with_source: bool) -> str:
    """Text that changes when ``fn`` does: its qualified name, and for user code its source,
    defaults and the values it closes over."""
    base = _unwrap(fn)
    parts = [f"{getattr(base, '__module__', '?')}.{getattr(base, '__qualname__', type(base).__name__)}"]
    if fn is not base:
        parts.append(repr(getattr(fn, "args", ())) + repr(getattr(fn, "keywords", {})))
    if with_source:
        target = base if inspect.isfunction(base) or inspect.ismethod(base) else type(base)
        try:
            parts.append(inspect.getsource(target))
        except (OSError, TypeError):  # no source to read (defined at a prompt): its bytecode
            code = getattr(base, "__code__", None)
            parts.append(repr((code.co_code, code.co_consts)) if code is not None else repr(base))
        parts.append(repr(getattr(base, "__defaults__", None)))
        cells = getattr(base, "__closure__", None) or ()
        parts.append(repr([_cell(c) for c in cells]))
    return "\n".join(parts)


def _cell(c: Any) -> str:
    try:
        v = c.cell_contents
    except ValueError:
        return "<empty>"
    if inspect.isfunction(v):
        return _describe_fn(v, True)
    return repr(v)


class Pipeline:
    """An immutable ordered list of :class:`Pass` es with distinct names.

    Editing methods return a new pipeline; names are matched exactly, and an unknown one is a
    ConfigError naming the passes there are. ``target`` says which target the pipeline was made
    for (``None``: any).
    """

    __slots__ = ("_passes", "target")

    def __init__(self, passes: Iterable[Pass] = (), target: Optional[str] = None):
        ps = tuple(passes)
        seen: set = set()
        for p in ps:
            if not isinstance(p, Pass):
                raise ConfigError(f"a pipeline holds tegula.transform.Pass objects, got {type(p).__name__}",
                                  hint="wrap the function: Pass('MyPass', fn)")
            if p.name in seen:
                raise ConfigError(f"the pipeline has two passes named '{p.name}'",
                                  hint="give each pass its own name")
            seen.add(p.name)
        self._passes = ps
        self.target = target

    # -- reading ------------------------------------------------------------------------------
    def names(self) -> list[str]:
        """Pass names in order."""
        return [p.name for p in self._passes]

    @property
    def passes(self) -> tuple[Pass, ...]:
        return self._passes

    def __iter__(self) -> Iterator[Pass]:
        return iter(self._passes)

    def __len__(self) -> int:
        return len(self._passes)

    def __contains__(self, name: object) -> bool:
        return name in self.names()

    def __getitem__(self, key: Union[int, str]) -> Pass:
        return self._passes[self._index(key) if isinstance(key, str) else key]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Pipeline) and self._passes == other._passes and self.target == other.target

    def __hash__(self) -> int:
        return hash((self._passes, self.target))

    def __repr__(self) -> str:
        head = f"Pipeline for {self.target}" if self.target else "Pipeline"
        if not self._passes:
            return f"{head}: no passes (the IR runs as the frontend produced it)"
        width = max(len(n) for n in self.names())
        rows = [f"{head} ({len(self)} passes):"]
        for i, p in enumerate(self._passes, 1):
            tag = " [user]" if p.user_supplied else ""
            rows.append(f"  {i:>2}. {p.name:<{width}}  {p.reason}{tag}".rstrip())
        return "\n".join(rows)

    # -- editing ------------------------------------------------------------------------------
    def _index(self, name: str) -> int:
        names = self.names()
        if name in names:
            return names.index(name)
        close = difflib.get_close_matches(str(name), names + [INPUT], n=1)
        where = f" for {self.target}" if self.target else ""
        raise ConfigError(f"the pipeline{where} has no pass named {name!r}",
                          hint=(f"did you mean {close[0]!r}? " if close else "")
                          + f"passes: {', '.join(names) or 'none'}; '{INPUT}' is the point before the first")

    def _with(self, passes: Sequence[Pass]) -> "Pipeline":
        return Pipeline(passes, self.target)

    def insert_before(self, name: str, p: Pass) -> "Pipeline":
        """A copy with ``p`` just before the pass ``name``."""
        i = self._index(name)
        return self._with(self._passes[:i] + (p,) + self._passes[i:])

    def insert_after(self, name: str, p: Pass) -> "Pipeline":
        """A copy with ``p`` just after the pass ``name`` (``"input"``: before every pass)."""
        i = 0 if name == INPUT else self._index(name) + 1
        return self._with(self._passes[:i] + (p,) + self._passes[i:])

    def replace(self, name: str, p: Pass) -> "Pipeline":
        """A copy with ``p`` in place of the pass ``name``."""
        i = self._index(name)
        return self._with(self._passes[:i] + (p,) + self._passes[i + 1:])

    def remove(self, name: str) -> "Pipeline":
        """A copy without the pass ``name``."""
        i = self._index(name)
        return self._with(self._passes[:i] + self._passes[i + 1:])

    def until(self, name: str) -> "Pipeline":
        """A copy holding only the passes before ``name``."""
        return self._with(self._passes[:self._index(name)])

    # -- running ------------------------------------------------------------------------------
    def run(self, func: PrimFunc, instruments: Optional[Sequence[Any]] = None) -> PrimFunc:
        """Apply every pass in order and return the result. ``instruments`` (default: those the
        settings ask for, see :func:`tegula.transform.instruments.default_instruments`) are called
        around each pass; an error a pass or an instrument raises is reported to every instrument
        and raised. An empty pipeline with no instruments given returns ``func`` at once."""
        if not self._passes and instruments is None:
            return func
        inst = list(default_instruments() if instruments is None else instruments)
        for i in inst:
            i.start(self, func)
        for p in self._passes:
            try:
                for i in inst:
                    i.before(p, func)
                t0 = time.perf_counter()
                func = p(func)
                dt = time.perf_counter() - t0
                for i in inst:
                    i.after(p, func, dt)
            except Exception as e:
                for i in inst:
                    i.failed(p, e)
                raise
        for i in inst:
            i.finish(func)
        return func

    def fingerprint(self) -> str:
        """A hash of the pass names, options and user pass sources (part of the disk-cache key)."""
        h = hashlib.sha256()
        for p in self._passes:
            data = p.fingerprint().encode()
            h.update(len(data).to_bytes(8, "little"))
            h.update(data)
        return h.hexdigest()[:16]


@dataclass(frozen=True)
class PassSpec:
    """One row of a target's pipeline table.

    ``unless`` names a pass config that removes the pass when true, ``only_if`` one without which
    it is left out; ``archs`` the archs it runs for (empty: every arch). ``target_options`` names
    options filled from the target (``"arch"``); ``config_options`` pairs an option name with the
    pass config that gives its value (None when unset).
    """

    name: str
    fn: Callable[..., PrimFunc]
    reason: str
    unless: Optional[str] = None
    only_if: Optional[str] = None
    archs: tuple[str, ...] = ()
    target_options: tuple[str, ...] = ()
    config_options: tuple[tuple[str, str], ...] = ()

    def wanted(self, arch: Optional[str], pass_configs: dict) -> bool:
        """Whether the pass is in the pipeline for ``arch`` under ``pass_configs``."""
        if self.archs and arch not in self.archs:
            return False
        if self.unless and pass_configs.get(self.unless):
            return False
        return not self.only_if or bool(pass_configs.get(self.only_if))

    def make(self, facts: dict, pass_configs: dict) -> Pass:
        """The Pass of this row, its options filled from ``facts`` and ``pass_configs``."""
        options = {o: facts[o] for o in self.target_options}
        options.update((o, pass_configs.get(key)) for o, key in self.config_options)
        return Pass(self.name, self.fn, self.reason, **options)


def pipeline_for(target: Any, pass_configs: Optional[dict] = None) -> Pipeline:
    """The pipeline ``target`` builds with (a target string such as ``"cuda:sm_80"``,
    ``"cuda:sm_90a"``, ``"cuda-emu"`` or ``"cpu"``, or a Target), under ``pass_configs``.

    The interpreter's pipeline is empty: passes a user inserts there run on the tile-level IR
    before it is interpreted. Raises ConfigError for an unknown target, or a ``"cuda"`` target
    with no arch on a machine without a GPU.
    """
    t = parse_target(target)
    kind = kind_of(t)
    cfg = check_pass_configs(pass_configs)
    if kind.pipeline is None:
        return Pipeline((), target=str(t))
    lowered = kind.lowering_target(t)
    facts = {"arch": lowered.arch, "interpret": lowered.interpret}
    passes = [row.make(facts, cfg) for row in load_ref(kind.pipeline) if row.wanted(lowered.arch, cfg)]
    return Pipeline(passes, target=str(lowered))


def check_pipeline(pipeline: Any, target: Any, pass_configs: Optional[dict] = None) -> Pipeline:
    """The pipeline a build of ``target`` uses: ``pipeline`` when given (ConfigError when it is
    not a Pipeline or was made for another target), else :func:`pipeline_for`."""
    if pipeline is None:
        return pipeline_for(target, pass_configs)
    if not isinstance(pipeline, Pipeline):
        raise ConfigError(f"pipeline= takes a tegula.transform.Pipeline, got {type(pipeline).__name__}",
                          hint="start from tegula.transform.pipeline_for(target)")
    if pipeline.target is not None:
        t = parse_target(target)
        kind = kind_of(t)
        want = str(kind.lowering_target(t)) if kind.pipeline is not None else str(t)
        if want != pipeline.target:
            raise ConfigError(f"the pipeline was made for {pipeline.target}, and this build is for {want}",
                              hint=f"use tegula.transform.pipeline_for({want!r})")
    return pipeline
