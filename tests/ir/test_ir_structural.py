import pytest

from ir_samples import gemm_func, misc_func
from tegula.ir import expr as E
from tegula.ir.buffer import Buffer
from tegula.ir.expr import Var, const
from tegula.ir.span import Span, span_scope
from tegula.ir.stmt import BufferStore, For
from tegula.ir.structural import assert_structural_equal, structural_equal, structural_hash


def test_alpha_renamed_functions_are_equal():
    a, b = gemm_func(), gemm_func(m_name="M", loop_name="ko")
    assert structural_equal(a, b)
    assert_structural_equal(a, b)
    assert structural_hash(a) == structural_hash(b)
    assert structural_equal(misc_func(), misc_func())


def test_changed_constant_is_not_equal():
    a, b = gemm_func(), gemm_func(stages=4)
    assert not structural_equal(a, b)
    with pytest.raises(AssertionError) as info:
        assert_structural_equal(a, b)
    msg = str(info.value)
    assert "annotations['num_stages']" in msg and "3 vs 4" in msg
    assert "num_stages=3" in msg and "num_stages=4" in msg  # both scripts are shown
    assert structural_hash(a) != structural_hash(b)


def test_changed_tile_size_reports_first_path():
    with pytest.raises(AssertionError, match=r"allocs\[0\]\.shape\[1\]"):
        assert_structural_equal(gemm_func(block_k=32), gemm_func(block_k=64))


def test_vars_form_a_bijection():
    x, y = Var("x"), Var("y")
    assert structural_equal(x + 1, y + 1)
    assert structural_equal(x + x, y + y)
    assert not structural_equal(x + x, x + y)
    assert not structural_equal(x + y, x + x)
    assert not structural_equal(x + 1, y + 2)
    assert not structural_equal(x + 1, y + 1, map_free_vars=False)
    assert structural_equal(x + 1, x + 1, map_free_vars=False)


def test_dtypes_and_ops_matter_names_and_spans_do_not():
    x, y = Var("x"), Var("x", E.dt.int64)
    assert not structural_equal(x + 1, y + 1)
    assert not structural_equal(x + 1, x - 1)
    assert not structural_equal(E.const(1), E.const(1.0))
    with span_scope(Span("a.py", 3)):
        e1 = x * 2
    with span_scope(Span("b.py", 9)):
        e2 = x * 2
    assert structural_equal(e1, e2)
    assert structural_hash(e1) == structural_hash(e2)


def test_buffers_match_by_position_with_shape_and_scope():
    A, B = Buffer("A", (4,), "float32"), Buffer("B", (4,), "float32")
    C = Buffer("C", (4,), "float32", "shared")
    i, j = Var("i"), Var("j")
    s1 = For(i, const(0), 4, BufferStore(A, (i,), A[i] + 1.0))
    s2 = For(j, const(0), 4, BufferStore(B, (j,), B[j] + 1.0))
    s3 = For(j, const(0), 4, BufferStore(C, (j,), C[j] + 1.0))
    s4 = For(j, const(0), 4, BufferStore(A, (j,), B[j] + 1.0))
    assert structural_equal(s1, s2)
    assert not structural_equal(s1, s3)
    assert not structural_equal(s1, s4)


def test_hash_is_stable_and_name_blind():
    assert structural_hash(Var("p") * 3) == structural_hash(Var("q") * 3)
    assert structural_hash(Var("p") * 3) != structural_hash(Var("p") * 4)
