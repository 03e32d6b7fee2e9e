"""The showcase ops of examples/torch_ops.py (RMSNorm, RoPE, flash attention, forward and
backward as tegula kernels): results and gradients against float64 torch, opcheck on each, and
a transformer block built from them under torch.compile(fullgraph=True), forward and backward;
on the CPU interpreter in CI and on a GPU under ``-m gpu``."""
import pytest

torch = pytest.importorskip("torch")

from kernels_util import torch_ops_example  # noqa: E402

# (target, device, dtype, tolerance of a result or gradient relative to its largest value)
CASES = [pytest.param("cpu", "cpu", "float32", 1e-5, id="cpu"),
         pytest.param("cuda", "cuda", "float16", 2e-2, id="cuda", marks=pytest.mark.gpu)]
_OPS: dict = {}


def ops_for(target, dtype):
    if (target, dtype) not in _OPS:
        _OPS[(target, dtype)] = torch_ops_example().make_ops(dtype, target, namespace=f"tegula_showcase_{target}")
    return _OPS[(target, dtype)]


def close(got, ref, tol):
    got, ref = got.double(), ref.double()
    err = (got - ref).abs().max().item()
    assert err <= tol * max(1.0, ref.abs().max().item()), (err, ref.abs().max().item())


def grads(fn, *xs):
    """(output, gradients of sum(output * fixed random weights)) of fn at xs."""
    xs = [x.detach().requires_grad_() for x in xs]
    y = fn(*xs)
    g = torch.randn(y.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64).to(y.device)
    (y.double() * g).sum().backward()
    return y, [x.grad for x in xs]


@pytest.mark.parametrize("target,device,dtype,tol", CASES)
def test_rms_norm_forward_backward(target, device, dtype, tol):
    ops = ops_for(target, dtype)
    x = torch.randn(19, 64, device=device).to(getattr(torch, dtype))
    w = (1 + 0.5 * torch.randn(64, device=device)).to(x.dtype)

    def ref(x, w):
        return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-6) * w
    y, (gx, gw) = grads(lambda x, w: ops.rms_norm(x, w)[0], x, w)
    y64, (gx64, gw64) = grads(ref, x.double(), w.double())
    close(y, y64, tol)
    close(gx, gx64, tol)
    close(gw, gw64, tol * 4)   # a sum over rows
    torch.library.opcheck(ops.rms_norm, (x, w))


@pytest.mark.parametrize("target,device,dtype,tol", CASES)
def test_rope_forward_backward(target, device, dtype, tol):
    ex = torch_ops_example()
    ops = ops_for(target, dtype)
    b, n, h, d = 2, 5, 3, 16
    cos, sin = ex.rope_tables(n, d, device=device)
    x = torch.randn(b * n * h, d, device=device).to(getattr(torch, dtype))

    def ref(x):
        t = x.reshape(b, n, h, d)
        c, s = cos[:, None].double(), sin[:, None].double()
        return torch.cat([t[..., :d // 2] * c - t[..., d // 2:] * s,
                          t[..., d // 2:] * c + t[..., :d // 2] * s], -1).reshape(-1, d)
    y, (gx,) = grads(lambda x: ops.rope(x, cos, sin, h), x)
    y64, (gx64,) = grads(ref, x.double())
    close(y, y64, tol)
    close(gx, gx64, tol)
    torch.library.opcheck(ops.rope, (x, cos, sin, h))


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("target,device,dtype,tol", CASES)
def test_flash_attention_forward_backward(target, device, dtype, tol, causal):
    ops = ops_for(target, dtype)
    shape = (1, 2, 72, 32) if device == "cuda" else (1, 2, 40, 16)
    q, k, v = (torch.randn(shape, device=device).to(getattr(torch, dtype)) for _ in range(3))

    def ref(q, k, v):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    o, gs = grads(lambda q, k, v: ops.attention(q, k, v, causal)[0], q, k, v)
    o64, gs64 = grads(ref, q.double(), k.double(), v.double())
    close(o, o64, tol)
    for g, g64 in zip(gs, gs64):
        close(g, g64, tol * 2)
    torch.library.opcheck(ops.attention, (q, k, v, causal))


@pytest.mark.parametrize("target,device,dtype,tol", CASES)
def test_transformer_block_under_fullgraph_compile(target, device, dtype, tol):
    ex = torch_ops_example()
    ops = ops_for(target, dtype)
    torch.manual_seed(0)
    tdt = getattr(torch, dtype)
    dim, heads, n = (64, 2, 64) if device == "cuda" else (32, 2, 24)
    block = ex.Block(ops, dim=dim, heads=heads, dtype=tdt).to(device)
    ref_block = ex.Block(ops, dim=dim, heads=heads, dtype=torch.float64).to(device)
    ref_block.load_state_dict({k: p.double() for k, p in block.state_dict().items()})
    cos, sin = ex.rope_tables(n, dim // heads, device=device)
    x = torch.randn(2, n, dim, device=device).to(tdt)
    y64, (gx64,) = grads(lambda x: ex.reference_block(ref_block, x, cos.double(), sin.double()), x.double())
    compiled = torch.compile(block, fullgraph=True)
    y, (gx,) = grads(lambda x: compiled(x, cos, sin), x)
    close(y, y64, tol)
    close(gx, gx64, tol * 2)
    w64 = ref_block.qkv.weight.grad
    close(block.qkv.weight.grad, w64, tol * 4)
