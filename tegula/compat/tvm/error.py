"""``tvm.error``: TVM's error classes as tegula's (``TVMError`` is :class:`tegula.errors.TegulaError`)."""
from __future__ import annotations

from tegula import errors as _errors

TVMError = _errors.TegulaError


class InternalError(TVMError):
    """An invariant of the compiler broke (TVM's name for it)."""
