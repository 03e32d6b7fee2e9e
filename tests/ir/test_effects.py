"""One declaration of what each op reads and writes (tegula/ir/effects.py), asked by every pass that
orders, stages or binds memory: changing the declaration changes what each of them sees."""
from dataclasses import dataclass

import pytest

import tegula.language as T
from tegula.backends.cuda.analysis.pipelined_loop import written_buffers
from tegula.backends.cuda.analysis.shared_access import accesses
from tegula.backends.cuda.passes.insert_barriers import insert_barriers
from tegula.backends.cuda.analysis.smem_liveness import liveness
from tegula.backends.interp.batch import refusal
from tegula.ir import dtype as dt
from tegula.ir import effects as fx
from tegula.ir.buffer import Buffer, BufferRegion
from tegula.ir.effects import BuiltinEffects, Effects, effects
from tegula.ir.expr import Builtin, BufferLoad, Var, const
from tegula.ir.stmt import (BufferStore, Copy, Evaluate, Fill, Gemm, Kernel, PrimFunc, Reduce, TileOp,
                            seq)
from tegula.ir.tile_rules import TILE_RULES, tile_rule
from tegula.ir.visitor import post_order_visit
from tegula.runtime.args import written_params


def tile_ops(func):
    out = []
    post_order_visit(func.body, lambda n: out.append(n) if isinstance(n, TileOp) else None)
    return out


def test_core_tile_ops_declare_what_they_read_and_write():
    @T.prim_func
    def main(A: T.Tensor((64, 32), "float16"), B: T.Tensor((32, 64), "float16"),
             C: T.Tensor((64, 64), "float32"), M: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            A_s = T.alloc_shared((64, 32), "float16")
            B_s = T.alloc_shared((32, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            m = T.alloc_fragment((64,), "float32")
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.clear(acc)
            T.gemm(A_s, B_s, acc)
            T.reduce_max(acc, m, dim=1, clear=False)
            T.copy(acc, C)
            T.copy(m, M)

    ops = tile_ops(main)
    names = [([b.name for b in effects(o).read_buffers], [b.name for b in effects(o).written_buffers])
             for o in ops]
    assert names == [(["A"], ["A_s"]), (["B"], ["B_s"]), ([], ["acc"]), (["A_s", "B_s", "acc"], ["acc"]),
                     (["acc", "m"], ["m"]), (["acc"], ["C"]), (["m"], ["M"])]
    assert isinstance(effects(ops[0]), Effects) and effects(ops[0]).unit == fx.COPY
    assert effects(next(o for o in ops if isinstance(o, Gemm))).unit == fx.TENSOR_CORE
    assert not any(isinstance(o, Reduce) and o.clear for o in ops)


@dataclass(frozen=True, eq=False)
class Scale(TileOp):
    """A tile op a target might add: ``dst = src * k`` (for this test, only its effects)."""

    src: BufferRegion
    dst: BufferRegion


@pytest.fixture
def scale_rule():
    """Declare Scale's effects (reads src, writes dst); yield the rule setter; forget Scale after."""
    def declare(fn):
        tile_rule(Scale, "effects")(fn)

    declare(lambda n: Effects(reads=(n.src,), writes=(n.dst,)))
    yield declare
    TILE_RULES._rules.pop((Scale, "effects"), None)


def _scale_kernel():
    X = Buffer("X", (256,), "float32")
    Y = Buffer("Y", (256,), "float32")
    bx = Var("bx")
    lo = bx * 128
    body = Scale(BufferRegion(X, ((lo, 128),)), BufferRegion(Y, ((lo, 128),)))
    k = Kernel((2,), (128,), (bx,), (), body)
    return PrimFunc("scale", (X, Y), k), k


def test_a_new_tile_op_is_seen_through_its_declaration_alone(scale_rule):
    func, k = _scale_kernel()
    assert written_params(func) == frozenset({"Y"})          # argument binding
    assert [b.name for b in written_buffers(k.body)] == ["Y"]  # pipeline staging


def test_a_read_added_to_one_declaration_reaches_every_pass(scale_rule):
    X, Y = Buffer("X", (256,), "float32"), Buffer("Y", (256,), "float32")
    bx = Var("bx")
    k = Kernel((2,), (128,), (bx,), (), Copy(BufferRegion(X, ((bx * 128, 128),)),
                                             BufferRegion(Y, ((bx * 128, 128),))))
    assert refusal(k) is None          # the batched interpreter runs the blocks side by side
    before = TILE_RULES.get(Copy, "effects")
    # T.copy declared as also reading its destination: one changed declaration
    tile_rule(Copy, "effects")(lambda n: Effects(reads=(n.src, n.dst), writes=(n.dst,)))
    try:
        assert refusal(k) == "it reads global buffer 'Y', which it writes"
    finally:
        tile_rule(Copy, "effects")(before)
    assert refusal(k) is None
    # a write moved from dst to src: argument binding and staging follow the declaration
    func, sk = _scale_kernel()
    scale_rule(lambda n: Effects(reads=(n.dst,), writes=(n.src,)))
    assert written_params(func) == frozenset({"X"})
    assert [b.name for b in written_buffers(sk.body)] == ["X"]


def _addr(buf, i=0):
    return Builtin("address_of", (BufferLoad(buf, (const(i),)),), dt.uint64)


def _builtin_kernel(name):
    """``A_s[tx] = 1``, then ``name(&A_s[0])``: a barrier between them exactly when ``name`` reads
    (or writes) A_s."""
    A_s = Buffer("A_s", (128,), "float32", "shared")
    tx, bx = Var("tx"), Var("bx")
    body = seq(BufferStore(A_s, (tx,), const(1.0)), Evaluate(Builtin(name, (_addr(A_s),), dt.bool_)))
    k = Kernel((1,), (128,), (bx,), (A_s,), body, thread_var=tx)
    return PrimFunc("f", (), k), A_s


def _barriers(func):
    out = []
    post_order_visit(func.body, lambda n: out.append(n) if isinstance(n, Builtin) and n.name == "sync_threads"
                     else None)
    return len(out)


def test_a_builtin_read_declared_once_reaches_barriers_and_liveness(monkeypatch):
    name = "tl::test_effect_probe"
    monkeypatch.setitem(fx.BUILTINS, name, BuiltinEffects(reads=(), writes=()))
    func, A_s = _builtin_kernel(name)
    call = func.body.body.stmts[1]
    assert accesses(call) == (set(), set())
    assert _barriers(insert_barriers(func)) == 0
    # the probe now reads its argument: InsertBarriers orders it after the store
    monkeypatch.setitem(fx.BUILTINS, name, BuiltinEffects(reads=(0,), writes=()))
    assert accesses(call) == ({A_s}, set())
    assert _barriers(insert_barriers(func)) == 1
    # asynchronous (its write lands later) and ordered by an mbarrier: the threads' barriers skip
    # it, shared-memory liveness keeps its target live
    monkeypatch.setitem(fx.BUILTINS, name, BuiltinEffects(reads=(0,), writes=(0,), is_async=True,
                                                          mbarrier_ordered=True))
    assert accesses(call, ordering=True) == (set(), set())
    assert _barriers(insert_barriers(func)) == 0
    assert A_s in liveness(func.body).first


def test_undeclared_builtins_read_and_write_every_buffer_they_are_handed():
    func, A_s = _builtin_kernel("tl::some_unknown_call")
    assert fx.builtin_effects("tl::some_unknown_call") is fx.UNDECLARED
    assert accesses(func.body.body.stmts[1]) == ({A_s}, {A_s})
    assert fx.builtin_effects("tl::mbarrier_wait").mbarrier_ordered


def test_copy_and_fill_on_one_global_buffer_keep_blocks_apart():
    X = Buffer("X", (256,), "float32")
    bx = Var("bx")
    r = BufferRegion(X, ((bx * 128, 128),))
    k = Kernel((2,), (128,), (bx,), (), seq(Fill(r, const(0.0)), Copy(r, r)))
    assert refusal(k) == "it reads global buffer 'X', which it writes"
