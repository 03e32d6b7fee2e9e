"""tegula's exceptions.

Every mistake a user can make in a kernel or in a call raises a subclass of :class:`TegulaError`.
Kernel errors carry a :class:`~tegula.ir.span.Span`; their message shows ``file:line:col``, the
source line and a caret under the column, then a hint when there is one::

    tegula.errors.ShapeError: T.copy: source tile (64, 32) does not match destination (128, 32)
      --> gemm.py:14:12
       |
    14 |             T.copy(A[by * 64, k * 32], A_shared)
       |             ^
    hint: give both sides the same extents
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from tegula.ir.span import Span


def render(message: str, span: "Optional[Span]" = None, hint: Optional[str] = None) -> str:
    """``message``, the source excerpt of ``span`` and the hint, as errors and warnings show them."""
    parts = [message]
    if span is not None:
        parts.append(span.excerpt())
    if hint:
        parts.append(f"hint: {hint}")
    return "\n".join(parts)


class SemanticsWarning(UserWarning):
    """A kernel whose meaning is defined but probably not what its author meant (the message
    shows the line, like an error's)."""


class PerformanceWarning(UserWarning):
    """A kernel that is correct but will be slow for a reason tegula can name (the message shows
    the line and a fix; ``TEGULA_STRICT_PERF=1`` makes it an error)."""


class TegulaError(Exception):
    """Base of every error tegula raises for a user mistake."""

    def __init__(self, message: str, span: "Optional[Span]" = None, hint: Optional[str] = None):
        self.message = message
        self.span = span
        self.hint = hint
        super().__init__(self._render())

    def _render(self) -> str:
        return render(self.message, self.span, self.hint)

    def with_span(self, span: "Optional[Span]") -> "TegulaError":
        """Attach ``span`` when the error has none yet; returns self."""
        if self.span is None and span is not None:
            self.span = span
            self.args = (self._render(),)
        return self

    def __str__(self) -> str:
        return self._render()


class KernelSyntaxError(TegulaError):
    """Python syntax that cannot appear in a kernel, or a construct used the wrong way."""


class KernelNameError(TegulaError):
    """A name used in a kernel is not defined."""


class KernelTypeError(TegulaError):
    """Wrong number or kind of arguments to a T.* primitive, or a value of the wrong kind."""


class ShapeError(TegulaError):
    """Tile shapes that do not agree (copy, gemm, reductions, parallel loops)."""


class DTypeError(TegulaError):
    """An unknown dtype, or dtypes that cannot be combined."""


class ScopeError(TegulaError):
    """A buffer used in a way its memory scope does not allow (e.g. a fragment outside T.Parallel)."""


class OutOfBoundsError(TegulaError, IndexError):
    """An element access outside a buffer's bounds: a constant index, found when the kernel is
    built, or any index, found while running it."""


class LayoutError(TegulaError):
    """Layouts that conflict or cannot be inferred."""


class ArgumentError(TegulaError, TypeError):
    """A bad argument when calling a compiled kernel: names the parameter, expected and actual."""


class CompileError(TegulaError):
    """A kernel could not be compiled for its target (including resource limits)."""


class ResourceError(CompileError):
    """A kernel needs more of a resource (shared memory, threads, registers) than the target has."""


class UnsupportedError(TegulaError):
    """A feature that tegula does not implement (yet) for this target."""


class MissingRuleError(UnsupportedError):
    """A tile operation has no rule for a target (see :mod:`tegula.ir.tile_rules`)."""


class ConfigError(TegulaError, ValueError):
    """An unknown or ill-typed pass configuration or setting."""


class RaceError(TegulaError):
    """A data race or memory error found while emulating a kernel."""


class DeviceAssertError(TegulaError):
    """A ``T.device_assert(cond, msg)`` whose condition was false when the kernel ran (``cpu`` and
    ``cuda-emu``; on a GPU the kernel prints the message and traps)."""


class SyncError(TegulaError):
    """A synchronisation bug found while running a kernel: a deadlock, or a flag set twice
    before its wait or left pending at the end (NPU cross-core and pipe flags)."""


class VerifyError(TegulaError):
    """The IR broke an invariant. A pass produced it: this is a bug in tegula, not in the kernel."""


class UninitializedReadError(TegulaError):
    """A read of a fragment or local element that was never written (``cpu`` and ``cuda-emu``):
    fresh memory holds a poison NaN of its own, which a read reports instead of returning."""


class InternalError(RuntimeError):
    """A bug in tegula itself, not in the kernel (not a :class:`TegulaError`): the message names
    the kernel line and what to do meanwhile; the original exception is its ``__cause__``."""

    def __init__(self, message: str, span: "Optional[Span]" = None, hint: Optional[str] = None):
        self.span = span
        super().__init__(render(f"internal error in tegula: {message}", span, hint))
