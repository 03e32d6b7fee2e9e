"""Where the time of one small-kernel call goes (run on a GPU machine)."""
import sys
import time

import torch

sys.path.insert(0, "examples")
import elementwise_add as ew  # noqa: E402

import tegula  # noqa: E402


def per_call(fn, n=5000):
    for _ in range(200):
        fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / n * 1e6


k = tegula.compile(ew.elementwise_add(1, 128), out_idx=[-1], target="cuda")
a = torch.randn(1, 128, device="cuda", dtype=torch.float16)
b = torch.randn_like(a)
c = torch.empty_like(a)
art = k.artifact
k(a, b)
launcher = art._launcher
from tegula.backends.cuda.launcher import raw_launch  # noqa: E402

print("ctypes launch available:", raw_launch() is not None)
print(f"torch a + b            {per_call(lambda: a + b):7.2f} us")
print(f"torch.empty            {per_call(lambda: torch.empty((1, 128), dtype=torch.float16, device='cuda')):7.2f} us")
print(f"launcher(values)       {per_call(lambda: launcher([a, b, c])):7.2f} us")
print(f"artifact.run           {per_call(lambda: art.run([a, b, c])):7.2f} us")
print(f"JITKernel call         {per_call(lambda: k(a, b)):7.2f} us")
import cProfile  # noqa: E402
import pstats  # noqa: E402

cProfile.run("for _ in range(3000): k(a, b)", "/tmp/launch.prof")
pstats.Stats("/tmp/launch.prof").sort_stats("tottime").print_stats(12)
