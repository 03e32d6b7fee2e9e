"""Lowering ``T.print`` of a value: like the interpreter, the message, the block index and the
value, printed by thread 0 of each block.

Before/after::

    T.print(x, msg="x")                            if tx == 0:
                                                       T.printf(bx, 0, 0, x, fmt="x block (%d, %d, %d): %g\\n")
"""
from __future__ import annotations

from tegula.errors import UnsupportedError
from tegula.ir import dtype as dt
from tegula.ir import expr as E
from tegula.ir.expr import Builtin
from tegula.ir.stmt import Evaluate, IfThenElse, Print, Stmt
from tegula.ir.tile_rules import tile_rule
from tegula.backends.cuda.passes.lower_tile_ops.context import Ctx, block_expr


@tile_rule(Print, "cuda")
def lower_print(ctx: Ctx, s: Print) -> Stmt:
    if not isinstance(s.obj, E.Expr):
        raise UnsupportedError("T.print of a tile is not supported on CUDA yet; print elements in a loop", s.span)
    v = block_expr(ctx, s.obj)
    t = v.dtype
    conv = "%g" if t.is_float else ("%lld" if t.bits == 64 and t.kind == "int" else
                                    "%llu" if t.bits == 64 else "%u" if t.kind == "uint" else "%d")
    prefix = f"{s.msg} " if s.msg else ""
    fmt = prefix + "block (%d, %d, %d): " + conv + "\n"
    blocks = list(ctx.block_vars) + [E.const(0)] * (3 - len(ctx.block_vars))
    return IfThenElse(E.compare("eq", ctx.tid, 0),
                      Evaluate(Builtin("printf", (*blocks, v), dt.bool_, (("fmt", fmt),))))
