from ir_samples import gemm_func, misc_func
from tegula.ir.buffer import Buffer
from tegula.ir.expr import Var, const
from tegula.ir.span import Span, span_scope
from tegula.ir.stmt import BufferStore, Copy, For, Kernel, LetStmt, TileOp, seq
from tegula.ir.structural import structural_equal
from tegula.ir.visitor import (Mutator, Visitor, collect_vars, post_order_visit, substitute,
                               uses_var)


class Counter(Visitor):
    def __init__(self):
        self.loads = 0
        self.tile_ops = []
        self.defs = []

    def visit_BufferLoad(self, node):
        self.loads += 1
        self.generic_visit(node)

    def visit_TileOp(self, node):  # found through the MRO for every tile operation
        self.tile_ops.append(type(node).__name__)
        self.generic_visit(node)

    def visit_def(self, node):
        self.defs.append(node.name)
        super().visit_def(node)


def test_visitor_dispatch_and_defs():
    c = Counter()
    c.visit(gemm_func())
    assert c.loads == 2  # C_local[i, j] and the cnt read
    assert c.tile_ops == ["Fill", "Copy", "Copy", "Gemm", "Copy"]
    assert c.defs == ["A", "B", "C", "n", "bx", "by", "A_shared", "B_shared", "C_local", "cnt", "k", "i", "j"]


def test_visitor_walks_buffer_shapes_and_dicts():
    names = [v.name for v in collect_vars(gemm_func())]
    assert names == ["m", "n", "bx", "by", "k", "i", "j"]


def test_post_order_visits_children_first():
    a, b = Var("a"), Var("b")
    seen = []
    post_order_visit((a + b) * 2, lambda n: seen.append(str(n)))
    assert seen == ["a", "b", "a + b", "2", "(a + b) * 2"]


def test_mutator_identity_keeps_every_node():
    f = misc_func()
    assert Mutator().visit(f) is f


def test_mutator_rebuilds_only_changed_path_and_keeps_spans():
    A = Buffer("A", (8,), "float32")
    i, j = Var("i"), Var("j")
    with span_scope(Span("k.py", 5)):
        untouched = BufferStore(A, (j,), const(0.0))
        changed = BufferStore(A, (i,), A[i] * 2.0)
    s = seq(untouched, changed)

    class Double(Mutator):
        def visit_Var(self, v):
            return v * 2 if v is i else v

    out = Double().visit(s)
    assert out is not s
    assert out.stmts[0] is untouched
    assert str(out.stmts[1].indices[0]) == "i * 2"
    assert out.stmts[1].span == Span("k.py", 5)
    assert out.stmts[1].value.span == Span("k.py", 5)


def test_buffer_map_remaps_everywhere():
    f = gemm_func()
    kern = f.body
    old = kern.allocs[0]  # A_shared
    new = Buffer("A_shared2", old.shape, old.dtype, old.scope)
    lay = object()
    kern2 = Kernel(kern.grid, kern.threads, kern.block_vars, kern.allocs, kern.body, kern.alloc_inits,
                   {"layout_map": {old: lay}})
    out = Mutator(buffer_map={old: new}).visit(f.with_body(kern2))
    assert out.body.allocs[0] is new
    assert list(out.body.annotations["layout_map"]) == [new]
    regions = []
    post_order_visit(out, lambda n: regions.append(n.buffer) if type(n).__name__ == "BufferRegion" else None)
    assert new in regions and old not in regions


def test_substitute_exprs_and_defining_vars():
    i, j, k = Var("i"), Var("j"), Var("k")
    e = i * 4 + j
    assert str(substitute(e, {i: 3})) == "3 * 4 + j"
    assert str(substitute(e, {j: k + 1})) == "i * 4 + (k + 1)"
    assert substitute(e, {k: 1}) is e
    A = Buffer("A", (8,), "float32")
    loop = For(i, const(0), 8, BufferStore(A, (i,), const(0.0)))
    renamed = substitute(loop, {i: j})
    assert renamed.var is j and renamed.body.indices[0] is j
    assert structural_equal(renamed, loop)
    kept = substitute(loop, {i: 0})  # a constant cannot replace the definition
    assert kept.var is i


def test_uses_var_and_collect_vars():
    i, j, k = Var("i"), Var("j"), Var("k")
    A = Buffer("A", (Var("n"), 4), "float32")
    s = seq(LetStmt(k, i + 1), BufferStore(A, (k, j), const(0.0)))
    assert uses_var(s, i) and uses_var(s, j) and not uses_var(s, Var("i"))
    assert uses_var(s, [Var("z"), j])
    assert [v.name for v in collect_vars(s)] == ["k", "i", "n", "j"]


def test_copy_is_a_tile_op():
    assert issubclass(Copy, TileOp)
