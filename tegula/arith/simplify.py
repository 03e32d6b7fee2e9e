"""Expression simplification (minimal placeholder: constant folding happens at construction)."""
from __future__ import annotations

from tegula.ir.expr import Expr


def simplify(e: Expr) -> Expr:
    return e
