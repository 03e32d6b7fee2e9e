"""tegula.torch.op: a kernel as a torch.library custom op: schema from the kernel's parameters,
fake outputs (symbolic sizes included), autograd; opcheck and gradcheck pass; user mistakes are
typed errors naming the parameter."""
import functools

import pytest

torch = pytest.importorskip("torch")

import tegula  # noqa: E402
import tegula.language as T  # noqa: E402
import tegula.torch  # noqa: E402
from tegula.errors import ArgumentError  # noqa: E402

from kernels_util import axpy_inplace, eager_add, scale_rows  # noqa: E402


def _name(base):
    _name.n = getattr(_name, "n", 0) + 1
    return f"tegula_test::{base}_{_name.n}"


def test_op_of_a_jit_kernel_schema_result_and_opcheck():
    k = tegula.compile(scale_rows(12, 16), out_idx=[-1], target="cpu")
    op = tegula.torch.op(_name("scale"), k)
    assert str(op.default._schema).endswith("(Tensor X, Tensor W) -> Tensor")
    x, w = torch.randn(12, 16), torch.randn(16)
    torch.testing.assert_close(op(x, w).double(), x.double() ** 2 * w.double())
    torch.library.opcheck(op, (x, w))


def test_op_of_an_eager_function_takes_its_keyword_arguments():
    op = tegula.torch.op(_name("add"), eager_add())
    assert "Tensor A, Tensor B, int block=64) -> Tensor" in str(op.default._schema)
    x, y = torch.randn(77), torch.randn(77)
    torch.testing.assert_close(op(x, y, block=32).double(), x.double() + y.double())
    torch.library.opcheck(op, (x, y))
    torch.library.opcheck(op, (torch.randn(5), torch.randn(5)), {"block": 32})


def test_op_of_a_prim_func_and_of_a_lazy_factory_with_its_arguments():
    op = tegula.torch.op(_name("axpy"), tegula.compile(axpy_inplace(40), target="cpu"), mutates_args=("Y",))
    assert "Tensor(a!) Y, float a) -> ()" in str(op.default._schema)
    x, y = torch.randn(40), torch.randn(40)
    y0 = y.clone()
    op(x, y, 0.5)
    torch.testing.assert_close(y.double(), y0.double() + 0.5 * x.double())
    torch.library.opcheck(op, (x, y, 0.5))

    factory = tegula.jit(out_idx=[-1], target="cpu")(scale_rows)
    op2 = tegula.torch.op(_name("lazy"), functools.partial(factory, 8, 4))
    op3 = tegula.torch.op(_name("prim"), scale_rows(8, 4), mutates_args=("Y",))   # every parameter an input
    x, w = torch.randn(8, 4), torch.randn(4)
    torch.testing.assert_close(op2(x, w).double(), x.double() ** 2 * w.double())
    assert "Tensor(a!) Y) -> ()" in str(op3.default._schema)


def test_op_with_backward_passes_opcheck_and_gradcheck():
    k = tegula.compile(scale_rows(T.dynamic("M"), 6, "float64"), out_idx=[-1], target="cpu")
    grad_k = tegula.compile(scale_rows(T.dynamic("M"), 6, "float64"), out_idx=[-1], target="cpu")

    def backward(ctx, g):
        x, w, _ = ctx.saved_tensors
        # d/dx (x^2 w) = 2 x w; d/dw = sum_rows(x^2 g): a tegula kernel and torch code
        return 2 * x * w * g, (grad_k(x, torch.ones_like(w)) * g).sum(0)

    op = tegula.torch.op(_name("sq"), k, backward=backward)
    x = torch.randn(7, 6, dtype=torch.float64, requires_grad=True)
    w = torch.randn(6, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(op, (x, w))
    torch.library.opcheck(op, (x, w))
    y = torch.compile(lambda x, w: op(x, w).sum(), fullgraph=True, dynamic=True, backend="aot_eager")(x, w)
    y.backward()
    torch.testing.assert_close(x.grad, 2 * x.detach() * w.detach().expand(7, 6))


def test_fake_outputs_follow_symbolic_sizes():
    M = T.dynamic("M")
    op = tegula.torch.op(_name("dyn"), tegula.compile(scale_rows(M, 8), out_idx=[-1], target="cpu"))
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    with FakeTensorMode(shape_env=ShapeEnv()) as mode:
        x = mode.from_tensor(torch.randn(5, 8), symbolic_context=None)
        y = op(x, torch.empty(8))
    assert y.shape[1] == 8 and y.dtype == torch.float32
    f = torch.compile(lambda x, w: op(x, w), fullgraph=True, dynamic=True, backend="aot_eager")
    for m in (3, 11):
        x, w = torch.randn(m, 8), torch.randn(8)
        torch.testing.assert_close(f(x, w).double(), x.double() ** 2 * w.double())


def test_mistakes_are_argument_errors():
    inplace = tegula.compile(axpy_inplace(40), target="cpu")
    with pytest.raises(ArgumentError, match="writes its input 'Y'.*mutates_args") as e:
        tegula.torch.op(_name("bad"), inplace)
    assert "mutates_args=('Y',)" in str(e.value)
    with pytest.raises(ArgumentError, match="'a', which is not a tensor input"):
        tegula.torch.op(_name("bad"), inplace, mutates_args=("Y", "a"))
    lazy = tegula.jit(out_idx=[-1], target="cpu")(scale_rows)
    with pytest.raises(ArgumentError, match="lazy-style factory"):
        tegula.torch.op(_name("bad"), lazy)
    with pytest.raises(ArgumentError, match="expected a JITKernel"):
        tegula.torch.op(_name("bad"), lambda x: x)
    with pytest.raises(ArgumentError, match="is not 'namespace::name'"):
        tegula.torch.op("a::b::c", inplace)


CACHED_SCRIPT = '''
import sys, torch
sys.path.insert(0, {tests!r})
import tegula, tegula.torch
from kernels_util import eager_add
add = eager_add()
def backward(ctx, g):
    g = g.contiguous()
    return add(g, g), None   # a tegula kernel in the backward
double = tegula.torch.op("cache_test::double", add, backward=lambda ctx, g: (backward(ctx, g)[0], backward(ctx, g)[0], None))
x = torch.randn(50, requires_grad=True)
y = torch.randn(50, requires_grad=True)
torch.compile(lambda x, y: double(x, y).sum(), fullgraph=True)(x, y).backward()
assert torch.equal(x.grad, torch.full_like(x, 2.0)) and torch.equal(y.grad, torch.full_like(y, 2.0))
print("ok")
'''


def test_a_later_process_runs_the_cached_compiled_backward(tmp_path):
    """torch.compile caches graphs on disk by the ops they call: a backward that calls tegula
    kernels runs inside the op's own ``_backward`` op, so a later process that loads the cached
    graph finds every op it calls (it found none of the kernels' ops registered while tracing)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "run.py"
    script.write_text(CACHED_SCRIPT.format(tests=str(Path(__file__).parent)))
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "cache"),
               PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    for _ in range(2):   # the second run loads what the first cached
        out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=600)
        assert out.returncode == 0 and "ok" in out.stdout, out.stderr[-3000:]
