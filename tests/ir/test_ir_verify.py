import pytest

from ir_samples import gemm_func, misc_func
from tegula.errors import VerifyError
from tegula.ir import expr as E
from tegula.ir.buffer import Buffer, BufferRegion
from tegula.ir.expr import BinOp, Var, const
from tegula.ir.span import Span, span_scope
from tegula.ir.stmt import (Break, BufferStore, Copy, Fill, For, IfThenElse, Kernel, LetStmt,
                            PrimFunc, SeqStmt, While, seq)
from tegula.ir.verify import verify, well_formed

A = Buffer("A", (16, 16), "float32")


def kernel_func(body, allocs=(), params=(A,)):
    bx = Var("bx")
    return PrimFunc("f", tuple(params), Kernel((1,), (32,), (bx,), tuple(allocs), body(bx)))


def test_sample_functions_verify():
    verify(gemm_func())
    verify(misc_func())
    assert well_formed(gemm_func()) == []


def test_loop_var_used_after_its_loop():
    i = Var("i")
    f = kernel_func(lambda bx: seq(For(i, const(0), 16, BufferStore(A, (i, i), const(0.0))),
                                   BufferStore(A, (i, bx), const(1.0))))
    with pytest.raises(VerifyError, match="var 'i' is used outside the scope"):
        verify(f)


def test_let_scope_is_the_rest_of_its_sequence():
    x, i = Var("x"), Var("i")
    ok = kernel_func(lambda bx: seq(LetStmt(x, bx + 1), BufferStore(A, (x, x), const(0.0))))
    verify(ok)
    inner = SeqStmt((LetStmt(x, const(1)), BufferStore(A, (x, x), const(0.0))))
    bad = kernel_func(lambda bx: seq(For(i, const(0), 2, inner), BufferStore(A, (x, i), const(0.0))))
    errors = well_formed(bad)
    assert any("'x' is used outside" in e for e in errors)
    assert any("'i' is used outside" in e for e in errors)


def test_undefined_block_var_and_free_var():
    y = Var("y")
    with pytest.raises(VerifyError, match="'y'"):
        verify(kernel_func(lambda bx: BufferStore(A, (y, bx), const(0.0))))


def test_redefinition_in_scope():
    i = Var("i")
    f = kernel_func(lambda bx: For(i, const(0), 4, For(i, const(0), 4, BufferStore(A, (i, i), const(0.0)))))
    with pytest.raises(VerifyError, match="defined again"):
        verify(f)


def test_buffer_not_param_nor_allocated():
    S = Buffer("S", (16,), "float32", "shared")
    f = kernel_func(lambda bx: BufferStore(S, (bx,), const(0.0)))
    with pytest.raises(VerifyError, match="buffer 'S' is neither a parameter nor allocated"):
        verify(f)
    verify(kernel_func(lambda bx: BufferStore(S, (bx,), const(0.0)), allocs=(S,)))


def test_wrong_number_of_indices():
    f = kernel_func(lambda bx: BufferStore(A, (bx,), const(0.0)))
    with pytest.raises(VerifyError, match="2 dimension\\(s\\) but is accessed with 1"):
        verify(f)
    g = kernel_func(lambda bx: BufferStore(A, (bx, bx), E.BufferLoad(A, (bx, bx, bx))))
    with pytest.raises(VerifyError, match="accessed with 3"):
        verify(g)


def test_store_dtype_mismatch():
    f = kernel_func(lambda bx: BufferStore(A, (bx, bx), const(1.0, "float16")))
    with pytest.raises(VerifyError, match="store of a float16 value into buffer 'A' of dtype float32"):
        verify(f)


def test_binop_operand_dtypes_differ():
    f = kernel_func(lambda bx: BufferStore(A, (bx, bx), BinOp("add", const(1.0), E.Cast(E.dt.float16, A[bx, bx]))))
    with pytest.raises(VerifyError, match="different dtypes: float32 and float16"):
        verify(f)


def test_non_bool_conditions():
    with pytest.raises(VerifyError, match="if condition bx has dtype int32"):
        verify(kernel_func(lambda bx: IfThenElse(bx, BufferStore(A, (bx, bx), const(0.0)))))
    with pytest.raises(VerifyError, match="while condition"):
        verify(kernel_func(lambda bx: While(bx + 1, Break())))
    sel = lambda bx: BufferStore(A, (bx, bx), E.Select(bx, const(1.0), const(2.0)))  # noqa: E731
    with pytest.raises(VerifyError, match="T.if_then_else condition"):
        verify(kernel_func(sel))


def test_region_rank_mismatch():
    f = kernel_func(lambda bx: Fill(BufferRegion(A, ((const(0), 16),)), const(0.0)))
    with pytest.raises(VerifyError, match="1 range\\(s\\) for 2 dimension\\(s\\)"):
        verify(f)


def test_tile_op_outside_kernel():
    B = Buffer("B", (16, 16), "float32")
    f = PrimFunc("f", (A, B), Copy(A.region(), B.region()))
    with pytest.raises(VerifyError, match="tile operation Copy outside a T.Kernel"):
        verify(f)


def test_kernel_inside_kernel():
    inner = Kernel((1,), (32,), (Var("by"),), (), Fill(A.region(), const(0.0)))
    with pytest.raises(VerifyError, match="nested inside another T.Kernel"):
        verify(kernel_func(lambda bx: inner))


def test_break_outside_loop():
    with pytest.raises(VerifyError, match="break outside a loop"):
        verify(kernel_func(lambda bx: Break()))
    verify(kernel_func(lambda bx: While(bx < 1, Break())))


def test_error_points_at_span_and_lists_all():
    with span_scope(Span(__file__, 7, 4)):
        bad = BufferStore(A, (Var("bx"),), const(1.0, "float16"))
    f = kernel_func(lambda bx: bad)
    with pytest.raises(VerifyError) as info:
        verify(f)
    assert info.value.span == Span(__file__, 7, 4)
    assert "more" in str(info.value)
    assert len(well_formed(f)) == 3  # free var, index count, dtype
