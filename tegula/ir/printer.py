"""Printing IR as T-script (minimal; expressions only for now)."""
from __future__ import annotations

from tegula.ir import expr as E


def expr_str(e: E.Expr) -> str:
    if isinstance(e, E.Var):
        return e.name
    if isinstance(e, E.Const):
        return repr(e.value)
    if isinstance(e, E.BinOp):
        sym = E.BINARY_OPS[e.op]
        if sym.startswith("T."):
            return f"{sym}({expr_str(e.a)}, {expr_str(e.b)})"
        return f"({expr_str(e.a)} {sym} {expr_str(e.b)})"
    if isinstance(e, E.Compare):
        return f"({expr_str(e.a)} {E.COMPARE_OPS[e.op]} {expr_str(e.b)})"
    if isinstance(e, E.UnaryOp):
        return f"{E.UNARY_OPS[e.op]}{expr_str(e.a)}"
    if isinstance(e, E.Select):
        return f"T.if_then_else({expr_str(e.cond)}, {expr_str(e.then)}, {expr_str(e.else_)})"
    if isinstance(e, E.Cast):
        return f"T.Cast({e.to.name!r}, {expr_str(e.value)})"
    if isinstance(e, E.Call):
        return f"T.{e.name}({', '.join(expr_str(a) for a in e.args)})"
    if isinstance(e, E.BufferLoad):
        return f"{e.buffer.name}[{', '.join(expr_str(i) for i in e.indices)}]"
    return type(e).__name__


def script(func) -> str:
    raise NotImplementedError
