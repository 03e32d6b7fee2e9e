"""Calling tegula kernels inside torch.compile(fullgraph=True): no graph break, nothing
registered by the user, the right result; eager kernels compile once per shape, as outside."""
import pytest

torch = pytest.importorskip("torch")

import tegula  # noqa: E402
import tegula.language as T  # noqa: E402
from tegula.errors import InternalError  # noqa: E402

from kernels_util import axpy_inplace, eager_add, scale_rows  # noqa: E402


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def _builds(monkeypatch):
    """A list that grows by one for every kernel tegula.jit builds."""
    built = []
    inner = tegula.JITFunction._build

    def build(func, out_idx, settings):
        built.append(func.name)
        return inner(func, out_idx, settings)
    monkeypatch.setattr(tegula.JITFunction, "_build", staticmethod(build))
    return built


@pytest.mark.parametrize("backend", ["eager", "aot_eager", "inductor"])
def test_eager_kernel_inside_fullgraph_compile(backend):
    add = eager_add()
    f = torch.compile(lambda x, y: add(x, y) * 2 + 1, fullgraph=True, backend=backend)
    x, y = torch.randn(100), torch.randn(100)
    ref = (x.double() + y.double()) * 2 + 1
    torch.testing.assert_close(f(x, y).double(), ref, rtol=1e-6, atol=1e-6)


def test_eager_kernel_compiles_once_per_shape_under_dynamic_shapes(monkeypatch):
    add = eager_add()
    built = _builds(monkeypatch)
    f = torch.compile(lambda x, y: add(x, y).sum(), fullgraph=True, backend="aot_eager")
    for n in (100, 130, 70, 130, 100):   # the second size makes the graph dynamic
        x, y = torch.randn(n), torch.randn(n)
        torch.testing.assert_close(f(x, y).double(), (x.double() + y.double()).sum(), rtol=1e-5, atol=1e-4)
    assert sorted(built) == ["add"] * 3


def test_jit_kernel_with_outputs_by_name_and_in_place():
    k = tegula.compile(scale_rows(12, 16), out_idx=[-1], target="cpu")
    inc = tegula.compile(axpy_inplace(50), target="cpu")

    def f(x, w, y):
        out = k(X=x, W=w)
        y = y.clone()
        inc(x[0].contiguous().repeat(4)[:50], y, 2.0)   # writes y
        return out, y
    x, w, y = torch.randn(12, 16), torch.randn(16), torch.randn(50)
    out, y2 = torch.compile(f, fullgraph=True, backend="aot_eager")(x, w, y)
    torch.testing.assert_close(out.double(), x.double() ** 2 * w.double())
    torch.testing.assert_close(y2.double(), y.double() + 2 * x[0].repeat(4)[:50].double())


def test_dynamic_dimension_of_a_prim_func_is_symbolic_in_the_graph():
    M = T.dynamic("M")
    k = tegula.compile(scale_rows(M, 8), out_idx=[-1], target="cpu")
    f = torch.compile(lambda x, w: k(x, w) + 1, fullgraph=True, dynamic=True, backend="aot_eager")
    for m in (5, 9, 13):
        x, w = torch.randn(m, 8), torch.randn(8)
        torch.testing.assert_close(f(x, w).double(), x.double() ** 2 * w.double() + 1)


def test_graph_breaks_allowed_no_internal_error():
    """It was InternalError (unhashable type: 'numpy.ndarray' in backends/memo.py) when Dynamo
    traced into the interpreter."""
    add = eager_add()

    def f(x, y):
        z = add(x, y)
        print("", end="")   # a graph break
        return z * 2
    x, y = torch.randn(130), torch.randn(130)
    try:
        out = torch.compile(f)(x, y)
    except InternalError as e:  # pragma: no cover - the regression
        pytest.fail(f"InternalError: {e}")
    torch.testing.assert_close(out.double(), (x.double() + y.double()) * 2)


def test_kernel_called_in_a_backward_under_compile():
    """A backward that calls tegula kernels is traced by AOTAutograd with fake tensors."""
    add = eager_add(dtype="float32")

    class Twice(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return add(x, x)

        @staticmethod
        def backward(ctx, g):
            g = g.contiguous()   # the gradient of a sum is an expanded tensor
            return add(g, g)

    x = torch.randn(70, requires_grad=True)
    y = torch.compile(lambda x: Twice.apply(x).sum(), fullgraph=True, backend="aot_eager")(x)
    y.backward()
    torch.testing.assert_close(x.grad, torch.full_like(x, 2.0))


def test_lazy_factory_called_inside_the_compiled_function(monkeypatch):
    """The factory builds its kernel while Dynamo traces (once per arguments, as outside)."""
    lazy = tegula.jit(out_idx=[-1], target="cpu")(scale_rows)
    built = _builds(monkeypatch)
    f = torch.compile(lambda x, w: lazy(8, 4)(x, w) + lazy(8, 4)(x, w), fullgraph=True, backend="aot_eager")
    for _ in range(2):
        x, w = torch.randn(8, 4), torch.randn(4)
        torch.testing.assert_close(f(x, w).double(), 2 * x.double() ** 2 * w.double())
    assert len(built) <= 1   # built once (or found built by an earlier test)
