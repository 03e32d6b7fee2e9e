"""tegula calls in CUDA streams and graphs: launches go on torch's current stream; a call with
its outputs given allocates nothing and synchronizes nothing; a call is captured by
torch.cuda.graph and replayed, also under torch.compile(mode="reduce-overhead")."""
import time

import pytest

torch = pytest.importorskip("torch")

import tegula  # noqa: E402

from kernels_util import eager_add, vec_add  # noqa: E402

pytestmark = pytest.mark.gpu
N = 10_000


def _inputs():
    return (torch.randn(N, device="cuda", dtype=torch.float16) for _ in range(2))


def _ref(a, b):
    return (a.double() + b.double()).half()


def test_launch_goes_on_the_current_stream():
    k = tegula.compile(vec_add(N), target="cuda")
    a, b = _inputs()
    c = torch.zeros_like(a)
    k(a, b, c)
    c.zero_()
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        torch.cuda._sleep(200_000_000)   # keeps s busy for tens of milliseconds
        k(a, b, c)
    time.sleep(0.002)
    other = torch.cuda.Stream()
    with torch.cuda.stream(other):
        early = c.cpu()   # synchronizes `other` only: the launch waits behind the sleep on s
    assert not s.query() and (early == 0).all()
    s.synchronize()
    assert torch.equal(c, _ref(a, b))


def test_outputs_given_allocate_and_synchronize_nothing():
    k = tegula.compile(vec_add(N), target="cuda")
    a, b = _inputs()
    c = torch.empty_like(a)
    k(a, b, c)
    torch.cuda.synchronize()
    before = torch.cuda.memory_stats()["allocation.all.allocated"]
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(20):
            k(a, b, c)
    finally:
        torch.cuda.set_sync_debug_mode(0)
    assert torch.cuda.memory_stats()["allocation.all.allocated"] == before
    torch.cuda.synchronize()
    assert torch.equal(c, _ref(a, b))


def _warm(fn):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)


def test_cuda_graph_capture_and_replay():
    k = tegula.compile(vec_add(N), target="cuda")              # outputs given
    k_alloc = tegula.compile(vec_add(N), out_idx=[-1], target="cuda")   # output allocated
    add = eager_add(target="cuda", dtype="float16")              # eager style
    a, b = _inputs()
    c = torch.empty_like(a)
    _warm(lambda: (k(a, b, c), k_alloc(a, b), add(a, b)))
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        k(a, b, c)
        d = k_alloc(c, b)
        e = add(d, a)
    for _ in range(3):
        a.copy_(torch.randn_like(a))
        b.copy_(torch.randn_like(b))
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(c, _ref(a, b))
        assert torch.equal(d, _ref(c, b))
        assert torch.equal(e, _ref(d, a))


def test_reduce_overhead_compile():
    k_alloc = tegula.compile(vec_add(N), out_idx=[-1], target="cuda")
    add = eager_add(target="cuda", dtype="float16")
    f = torch.compile(lambda a, b: add(k_alloc(a, b), a) * 2, mode="reduce-overhead", fullgraph=True)
    for _ in range(4):   # warm-up runs, the capture, then replays
        a, b = _inputs()
        ref = (_ref(_ref(a, b), a).double() * 2).half()
        torch.testing.assert_close(f(a, b), ref)
