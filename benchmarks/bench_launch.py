"""Host cost of one tegula call beside torch's own, on one GPU, in interleaved rounds.

Each variant enqueues ``--calls`` launches of a tiny kernel (an fp16 add of ``--n`` elements: a
couple of microseconds on the GPU, so the loop is bound by the host) and synchronizes once; its
time per call is the host's cost of a call. Rounds alternate the variants so clock and
contention drift hit all alike; the table gives each one's median over the rounds and its ratio
to ``torch.add(a, b, out=c)``:

- ``torch.add(out=c)``: torch's own, with its output given (the bar);
- ``torch a + b``: torch allocating its output;
- ``tegula k(a, b, c)``: a kernel whose output is a parameter the caller gives (no allocation);
- ``tegula k(a, b)``: the same kernel with ``out_idx=[-1]`` (allocates its output);
- ``tegula signature path``: the call validated by its plan's signature (dtype, shape, device,
  contiguity and type of every tensor: the fast path before the shortcut of the last call);
- ``tegula launcher``: the launcher alone (``artifact.run(values)``), what a call adds beside it;
- ``raw cuLaunchKernel``: the driver call through ctypes with every argument prepared (the floor);
- ``tegula op (compiled)``: the kernel inside ``torch.compile(fullgraph=True)`` (one op call per
  graph call; graph overhead included, so it is not a per-launch number).

Prediction written before optimizing (2026-12-07): the first measured tree pays for building a
signature tuple of every tensor (dtype, shape, device, contiguity, type) to find the call's plan,
the torch.compile check, the list of values and a second function call before the launcher:
about 1.5x torch.add(out=) with the output given (some 3 us more on the H100's host), 1.8x
allocating. A fast path that checks each tensor against the plan of the last call directly
(no tuples, no hashing) and goes to the launcher from ``__call__`` should bring the call with
its output given to 0.8-1.0x.

Run it:  python benchmarks/bench_launch.py [--rounds 7 --calls 20000 --out results.json]
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import tegula  # noqa: E402
import tegula.language as T  # noqa: E402


def vec_add(n, dtype="float16", block=1024):
    @T.prim_func
    def add(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype), C: T.Tensor((n,), dtype)):
        with T.Kernel(T.ceildiv(n, block), threads=128) as bx:
            for i in T.Parallel(block):
                if bx * block + i < n:
                    C[bx * block + i] = A[bx * block + i] + B[bx * block + i]
    return add


def per_call(fn, calls):
    """Microseconds per call of ``calls`` back-to-back calls, with one synchronize."""
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / calls * 1e6


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=4096)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--calls", type=int, default=20000)
    p.add_argument("--out", default=None)
    args = p.parse_args()

    a = torch.randn(args.n, device="cuda", dtype=torch.float16)
    b = torch.randn_like(a)
    c = torch.empty_like(a)
    k = tegula.compile(vec_add(args.n), target="cuda")
    k_alloc = tegula.compile(vec_add(args.n), out_idx=[-1], target="cuda")
    k(a, b, c)
    assert torch.equal(c, a + b) and torch.equal(k_alloc(a, b), a + b)
    run = k.artifact.run
    values = [a, b, c]
    launcher = k.artifact._launcher
    loaded = launcher._loaded[a.get_device()]
    from tegula.backends.cuda.launcher import _c_stream, raw_launch

    raw = raw_launch()
    stream = _c_stream(torch.cuda.current_stream().cuda_stream)
    launcher._struct.pack_into(launcher._buf, 0, *[x.data_ptr() for x in values])

    variants = {
        "torch.add(out=c)": lambda: torch.add(a, b, out=c),
        "torch a + b": lambda: a + b,
        "tegula k(a, b, c)": lambda: k(a, b, c),
        "tegula k(a, b)": lambda: k_alloc(a, b),
        "tegula signature path": lambda: k._call((a, b, c), {}),
        "tegula launcher": lambda: run(values),
        "raw cuLaunchKernel": lambda: raw(loaded.handles[0], *loaded.static_dims, stream, launcher._c_ptrs, None),
    }
    try:
        compiled = torch.compile(lambda a, b: k_alloc(a, b), fullgraph=True)
        compiled(a, b)
        variants["tegula op (compiled)"] = lambda: compiled(a, b)
    except Exception as e:  # reported, the rest still measured
        print(f"torch.compile variant skipped: {type(e).__name__}: {str(e)[:300]}")
    for fn in variants.values():   # warm up
        per_call(fn, 2000)
    times: dict = {name: [] for name in variants}
    for _ in range(args.rounds):
        for name, fn in variants.items():
            times[name].append(per_call(fn, args.calls))
    base = statistics.median(times["torch.add(out=c)"])
    rows = []
    print(f"{'variant':24s} {'us/call':>8s} {'vs torch.add(out=)':>19s}   rounds")
    for name, ts in times.items():
        med = statistics.median(ts)
        rows.append({"variant": name, "us_per_call": med, "ratio_vs_torch_add_out": med / base,
                     "rounds_us": ts})
        print(f"{name:24s} {med:8.2f} {med / base:19.2f}   " + " ".join(f"{t:.2f}" for t in ts))
    result = {"benchmark": "bench_launch", "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "device": torch.cuda.get_device_name(), "host": platform.processor() or platform.machine(),
              "torch": torch.__version__, "n": args.n, "calls": args.calls, "rounds": args.rounds,
              "rows": rows}
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
