"""Functions of upper ir modules that lower ones call: printing a node, building a cast.

``expr.py`` prints expressions (``str(e)``) and ``stmt.py`` / ``structural.py`` print statements,
but the printer imports them; ``dtype.py``'s ``T.float16(3.0)`` builds a cast, but ``expr.py``
imports dtypes. Instead of importing upward (a cycle), the lower modules call these slots, which
the upper ones fill when imported (``tegula.ir`` imports the printer, so importing any ir module
fills them all).
"""
from __future__ import annotations

from typing import Any, Callable

_SLOTS: dict[str, Callable[..., Any]] = {}


def provide(name: str, fn: Callable[..., Any]) -> None:
    """Fill slot ``name`` ("expr_str", "script", "cast") with ``fn``."""
    _SLOTS[name] = fn


def _slot(name: str) -> Callable[..., Any]:
    return _SLOTS[name]


def expr_str(e: Any) -> str:
    """``e`` printed as T-script (:func:`tegula.ir.printer.expr_str`)."""
    return _slot("expr_str")(e)


def script(node: Any) -> str:
    """``node`` printed as T-script (:func:`tegula.ir.printer.script`)."""
    return _slot("script")(node)


def cast(dtype: Any, value: Any) -> Any:
    """``value`` cast to ``dtype`` (:func:`tegula.ir.expr.cast`)."""
    return _slot("cast")(dtype, value)
