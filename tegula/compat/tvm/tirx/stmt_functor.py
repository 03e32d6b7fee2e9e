"""``tvm.tirx.stmt_functor``: the walks user code runs over a kernel's IR, on tegula's IR.

``post_order_visit(node, f)`` calls ``f`` on every node, children first; ``pre_order_visit(node,
f)`` parents first, not descending below a node for which ``f`` returns ``False``;
``substitute(node, {var: value})`` replaces variables. TVM's rewriting helpers (``ir_transform``,
``renew_defs``...) need TVM's node classes and are refused with an UnsupportedError.
"""
from __future__ import annotations

from typing import Any, Callable

from tegula.errors import UnsupportedError
from tegula.ir.visitor import Visitor, post_order_visit, substitute  # noqa: F401


class _PreOrder(Visitor):
    def __init__(self, fn: Callable[[Any], Any]):
        self.fn = fn

    def visit(self, node: Any) -> None:
        if self.fn(node) is not False:
            self.generic_visit(node)


def pre_order_visit(node: Any, fn: Callable[[Any], Any]) -> None:
    """Call ``fn`` on every node under ``node`` (itself included), parents first; the children
    of a node for which ``fn`` returns ``False`` are skipped."""
    _PreOrder(fn).visit(node)


def _refused(name: str) -> Callable[..., Any]:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise UnsupportedError(f"tvm.tirx.stmt_functor.{name}: tegula's IR is not TVM's, and this "
                               "rewrite has no tegula equivalent",
                               hint="write a tegula pass instead (docs/passes.md)")
    refuse.__name__ = name
    return refuse


ir_transform = _refused("ir_transform")
renew_defs = _refused("renew_defs")
