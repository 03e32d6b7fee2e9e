"""Let-bound facts in statement simplification: constants fold, bounds prove guards, and a
variable defined twice (a copied statement) never carries facts from one copy to the other."""
from tegula.arith.simplify import simplify_stmt
from tegula.ir import expr as E
from tegula.ir.buffer import Buffer
from tegula.ir.stmt import BufferStore, IfThenElse, LetStmt, seq


def test_a_let_defined_twice_does_not_leak_its_constant():
    out = Buffer("out", (4,), "int32")
    v = E.Var("v")
    first = seq(LetStmt(v, E.const(1)), BufferStore(out, (E.const(0),), v))
    second = seq(LetStmt(v, E.Var("n") + 1), BufferStore(out, (E.const(1),), v))
    s = simplify_stmt(seq(IfThenElse(E.Var("c", E.as_expr(True).dtype), first), second))
    stores = [x for x in s.stmts if isinstance(x, BufferStore)]
    assert stores and stores[0].value is v  # not folded to the first copy's constant 1
    inner = s.stmts[0].then.stmts[1]
    assert isinstance(inner.value, E.Const) and inner.value.value == 1
