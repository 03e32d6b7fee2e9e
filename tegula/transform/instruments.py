"""Instruments: code that runs around every pass of a :class:`~tegula.transform.Pipeline`.

The pipeline knows nothing of them beyond these five calls, so tracing, verification, dumps and
timing plug in without any pass or backend asking for them:

- :class:`Record`: the IR after every pass, as a :class:`~tegula.transform.trace.Trace`
  (what ``tegula.tools.trace`` shows);
- :class:`Verify`: the IR verifier after every pass, a VerifyError naming the pass that broke it
  (on under ``TEGULA_VERIFY`` / ``TEGULA_DEBUG``, and in tests);
- :class:`Dump`: a Record written to a directory when the run ends or fails (``TEGULA_TRACE``);
- :class:`Timing`: seconds per pass.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from tegula import config
from tegula.errors import VerifyError
from tegula.ir.stmt import PrimFunc
from tegula.ir.verify import well_formed
from tegula.transform.trace import INPUT, Step, Trace, dump

if TYPE_CHECKING:
    from tegula.transform.pipeline import Pass, Pipeline


class Instrument:
    """Base class: every hook does nothing. Subclasses override the ones they need."""

    def start(self, pipeline: "Pipeline", func: PrimFunc) -> None:
        """Before the first pass, with the input function."""

    def before(self, p: "Pass", func: PrimFunc) -> None:
        """Before pass ``p`` runs on ``func``."""

    def after(self, p: "Pass", func: PrimFunc, seconds: float) -> None:
        """After pass ``p`` produced ``func`` in ``seconds``."""

    def failed(self, p: "Pass", error: BaseException) -> None:
        """When pass ``p`` (or an instrument around it) raised ``error``; the run stops."""

    def finish(self, func: PrimFunc) -> None:
        """After the last pass, with the result."""


def ir_problems(func: PrimFunc) -> list[str]:
    """What the verifier finds wrong with ``func`` (a verifier crash is reported, not raised)."""
    try:
        return well_formed(func)
    except Exception as e:
        return [f"the verifier could not check this IR: {type(e).__name__}: {e}"]


class Record(Instrument):
    """Keeps the IR after every pass in ``self.trace`` (step 0 is the input)."""

    def __init__(self) -> None:
        self.trace = Trace()

    def start(self, pipeline: "Pipeline", func: PrimFunc) -> None:
        self.trace = Trace(func_name=func.name, target=pipeline.target or "")
        self.trace.append(Step(INPUT, 0.0, func.script(), ir_problems(func), func))

    def after(self, p: "Pass", func: PrimFunc, seconds: float) -> None:
        self.trace.append(Step(p.name, seconds, func.script(), ir_problems(func), func))

    def failed(self, p: "Pass", error: BaseException) -> None:
        self.trace.error = error


class Verify(Instrument):
    """Raises VerifyError naming the pass after which the IR is no longer well formed."""

    def start(self, pipeline: "Pipeline", func: PrimFunc) -> None:
        self._check(func, None)

    def after(self, p: "Pass", func: PrimFunc, seconds: float) -> None:
        self._check(func, p)

    @staticmethod
    def _check(func: PrimFunc, p: Optional["Pass"]) -> None:
        problems = ir_problems(func)
        if problems:
            where = f"after pass '{p.name}'" if p is not None else "before the first pass"
            raise VerifyError(f"the IR of '{func.name}' is not well formed {where}: "
                              + "; ".join(problems[:5]) + (" ..." if len(problems) > 5 else ""),
                              hint="tegula.tools.trace(...) shows the IR after every pass")


class Dump(Record):
    """A Record written to ``directory`` (text and HTML) when the run ends, or fails."""

    def __init__(self, directory: str) -> None:
        super().__init__()
        self.directory = directory
        self.paths: list[str] = []

    def failed(self, p: "Pass", error: BaseException) -> None:
        super().failed(p, error)
        self.paths = dump(self.trace, self.directory)

    def finish(self, func: PrimFunc) -> None:
        self.paths = dump(self.trace, self.directory)


class Timing(Instrument):
    """Seconds per pass, in order: ``self.seconds`` is a list of ``(name, seconds)``."""

    def __init__(self) -> None:
        self.seconds: list[tuple[str, float]] = []

    def start(self, pipeline: "Pipeline", func: PrimFunc) -> None:
        self.seconds = []

    def after(self, p: "Pass", func: PrimFunc, seconds: float) -> None:
        self.seconds.append((p.name, seconds))

    def total(self) -> float:
        return sum(s for _, s in self.seconds)


def default_instruments() -> list[Instrument]:
    """The instruments the settings ask for: Dump under ``TEGULA_TRACE``, then Verify under
    ``TEGULA_VERIFY`` or ``TEGULA_DEBUG``."""
    s = config.get()
    out: list[Instrument] = []
    if s.trace_dir:
        out.append(Dump(s.trace_dir))
    if s.verify_ir or s.debug_tracebacks:
        out.append(Verify())
    return out
