"""Programs shaped like the official TileLang puzzles (tile-ai/tilelang-puzzles), written here,
run unchanged through ``python -m tegula run`` on the CPU: a helper module that imports
``from tilelang.jit import JITKernel, JITImpl`` and ``tilelang.engine.param.KernelParam``,
turns ``KernelParam.dtype`` into torch dtypes by comparing it with strings, compiles with
``f.compile(**hyper_params)`` and prints the source; eager-style ``@tilelang.jit`` kernels of
the puzzles' kinds (elementwise, broadcast, row reduction, online softmax, pipelined GEMM, int4
dequantized GEMM), each checked against a float64 reference on fresh random inputs."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

HELPER = '''
from typing import Callable
import tilelang

tilelang.disable_cache()

from tilelang.jit import JITKernel, JITImpl
from tilelang.engine.param import KernelParam
import torch

_DTYPES = {"float16": torch.float16, "float32": torch.float32, "uint8": torch.uint8, "int32": torch.int32}


def to_torch(dtype) -> torch.dtype:
    for name, t in _DTYPES.items():
        if dtype == name:
            return t
    raise ValueError(f"unsupported dtype {dtype}")


def inputs_for(params: "list[KernelParam]"):
    out = []
    for p in params[:-1]:  # the last parameter is the output
        dt = to_torch(p.dtype)
        if dt == torch.uint8:
            out.append(torch.randint(0, 255, p.shape, dtype=dt, device="cpu"))
        else:
            out.append(torch.randn(p.shape, dtype=dt, device="cpu"))
    return out


def check(puzzle_tl: JITImpl, reference: Callable, hyper: dict, atol=1e-2, rtol=1e-2, show=False):
    assert isinstance(puzzle_tl, JITImpl)
    kernel: JITKernel = puzzle_tl.compile(**hyper)
    assert isinstance(kernel, JITKernel)
    xs = inputs_for(kernel.params)
    want = reference(*[x.double() for x in xs])
    got = kernel(*[x.clone() for x in xs])
    assert torch.allclose(got.double(), want, atol=atol, rtol=rtol), (got, want)
    if show:
        kernel.print_source_code()
    print("OK", puzzle_tl.__name__)
'''

PROGRAM = '''
import tilelang
import tilelang.language as T
import torch
import sys
from helper import check
import tilelang.jit

# the decorator survived the helper's `from tilelang.jit import ...` and `import tilelang.jit`;
# the module stays importable by its path
assert callable(tilelang.jit) and not isinstance(tilelang.jit, type(sys)), tilelang.jit
assert sys.modules["tilelang.jit"].JITImpl is not None and sys.modules["tilelang.jit"].jit is tilelang.jit


@tilelang.jit
def relu_add(A, B, BLOCK: int):
    N = T.const("N")
    A: T.Tensor((N,), T.float16)
    B: T.Tensor((N,), T.float16)
    C = T.empty((N,), T.float16)
    with T.Kernel(T.ceildiv(N, BLOCK), threads=128) as pid:
        a = T.alloc_fragment((BLOCK,), T.float16)
        b = T.alloc_fragment((BLOCK,), T.float16)
        T.copy(A[pid * BLOCK], a)
        T.copy(B[pid * BLOCK], b)
        for i in T.Parallel(BLOCK):
            a[i] = T.if_then_else(a[i] + b[i] > T.float16(0), a[i] + b[i], T.float16(0))
        T.copy(a, C[pid * BLOCK])
    return C


@tilelang.jit
def outer_add(A, B, BM: int, BN: int):
    M, N = T.const("M, N")
    A: T.Tensor((M,), T.float32)
    B: T.Tensor((N,), T.float32)
    C = T.empty((M, N), T.float32)
    with T.Kernel(T.ceildiv(N, BN), T.ceildiv(M, BM), threads=128) as (pn, pm):
        for i, j in T.Parallel(BM, BN):
            C[pm * BM + i, pn * BN + j] = A[pm * BM + i] + B[pn * BN + j]
    return C


@tilelang.jit
def row_sum(A, BN: int, BM: int):
    N, M = T.const("N, M")
    A: T.Tensor((N, M), T.float32)
    B = T.empty((N,), T.float32)
    with T.Kernel(N // BN, threads=128) as pid:
        tile = T.alloc_fragment((BN, BM), T.float32)
        acc = T.alloc_fragment((BN,), T.float32)
        T.clear(acc)
        for m in T.Serial(M // BM):
            T.copy(A[pid * BN, m * BM], tile)
            T.reduce_sum(tile, acc, dim=1, clear=False)
        T.copy(acc, B[pid * BN])
    return B


@tilelang.jit
def softmax(A, BN: int, BM: int):
    N, M = T.const("N, M")
    A: T.Tensor((N, M), T.float32)
    B = T.empty((N, M), T.float32)
    with T.Kernel(N // BN, threads=128) as pid:
        tile = T.alloc_fragment((BN, BM), T.float32)
        mx = T.alloc_fragment((BN,), T.float32)
        cur = T.alloc_fragment((BN,), T.float32)
        total = T.alloc_fragment((BN,), T.float32)
        part = T.alloc_fragment((BN,), T.float32)
        T.fill(mx, -T.infinity(T.float32))
        T.clear(total)
        for m in T.Serial(M // BM):  # online: rescale the running sum to the new maximum
            T.copy(A[pid * BN, m * BM], tile)
            T.reduce_max(tile, cur, dim=1, clear=True)
            for i in T.Parallel(BN):
                cur[i] = T.max(cur[i], mx[i])
                total[i] = total[i] * T.exp(mx[i] - cur[i])
                mx[i] = cur[i]
            for i, j in T.Parallel(BN, BM):
                tile[i, j] = T.exp(tile[i, j] - mx[i])
            T.reduce_sum(tile, part, dim=1, clear=True)
            for i in T.Parallel(BN):
                total[i] = total[i] + part[i]
        for m in T.Serial(M // BM):
            T.copy(A[pid * BN, m * BM], tile)
            for i, j in T.Parallel(BN, BM):
                tile[i, j] = T.exp(tile[i, j] - mx[i]) / total[i]
            T.copy(tile, B[pid * BN, m * BM])
    return B


@tilelang.jit
def matmul(A, B, BM: int, BN: int, BK: int):
    M, N, K = T.const("M, N, K")
    A: T.Tensor((M, K), T.float16)
    B: T.Tensor((K, N), T.float16)
    C = T.empty((M, N), T.float16)
    with T.Kernel(T.ceildiv(N, BN), T.ceildiv(M, BM), threads=128) as (pn, pm):
        a = T.alloc_shared((BM, BK), T.float16)
        b = T.alloc_shared((BK, BN), T.float16)
        acc = T.alloc_fragment((BM, BN), T.float32)
        T.clear(acc)
        for k in T.Pipelined(K // BK, num_stages=3):
            T.copy(A[pm * BM, k * BK], a)
            T.copy(B[k * BK, pn * BN], b)
            T.gemm(a, b, acc)
        T.copy(acc, C[pm * BM, pn * BN])
    return C


@tilelang.jit
def int4_matmul(A, B, BM: int, BN: int, BK: int):
    M, N, K = T.const("M, N, K")
    A: T.Tensor((M, K), T.float16)
    B: T.Tensor((K, N // 2), T.uint8)
    C = T.empty((M, N), T.float16)
    with T.Kernel(T.ceildiv(M, BM), T.ceildiv(N, BN), threads=128) as (pm, pn):
        a = T.alloc_shared((BM, BK), T.float16)
        packed = T.alloc_shared((BK, BN // 2), T.uint8)
        b = T.alloc_shared((BK, BN), T.float16)
        acc = T.alloc_fragment((BM, BN), T.float32)
        T.clear(acc)
        for k in T.Pipelined(T.ceildiv(K, BK), num_stages=2):
            T.copy(A[pm * BM, k * BK], a)
            T.copy(B[k * BK, pn * BN // 2], packed)
            for i, j in T.Parallel(BK, BN // 2):
                b[i, j * 2] = T.cast(packed[i, j] & 0x0F, T.float16) - 8.0
                b[i, j * 2 + 1] = T.cast((packed[i, j] >> 4) & 0x0F, T.float16) - 8.0
            T.gemm(a, b, acc)
        T.copy(acc, C[pm * BM, pn * BN])
    return C


def int4_ref(A, B):
    lo, hi = (B.long() & 0x0F).double() - 8.0, ((B.long() >> 4) & 0x0F).double() - 8.0
    deq = torch.stack([lo, hi], dim=-1).reshape(B.shape[0], -1)
    return A @ deq


check(relu_add, lambda a, b: torch.clamp(a + b, min=0), {"N": 1024, "BLOCK": 256})
check(outer_add, lambda a, b: a[:, None] + b[None, :], {"M": 96, "N": 160, "BM": 32, "BN": 32})
check(row_sum, lambda a: a.sum(dim=1), {"N": 64, "M": 512, "BN": 16, "BM": 128}, atol=1e-3)
check(softmax, lambda a: torch.softmax(a, dim=1), {"N": 32, "M": 256, "BN": 8, "BM": 64}, atol=1e-5)
check(matmul, lambda a, b: a @ b, {"M": 128, "N": 192, "K": 256, "BM": 64, "BN": 64, "BK": 32}, show=True)
check(int4_matmul, int4_ref, {"M": 64, "N": 128, "K": 128, "BM": 32, "BN": 64, "BK": 32},
      atol=0.5, rtol=1e-2)
print("ALL PUZZLES OK")
'''


@pytest.mark.needs("torch")   # the programs import torch, as the puzzles do
def test_puzzle_shaped_programs_run_through_the_alias(tmp_path):
    (tmp_path / "helper.py").write_text(HELPER)
    (tmp_path / "prog.py").write_text(PROGRAM)
    env = dict(os.environ, PYTHONPATH=str(ROOT), TEGULA_TARGET="cpu")
    r = subprocess.run([sys.executable, "-m", "tegula", "run", "prog.py"], capture_output=True, text=True,
                       timeout=600, cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "ALL PUZZLES OK" in r.stdout
    for name in ("relu_add", "outer_add", "row_sum", "softmax", "matmul", "int4_matmul"):
        assert f"OK {name}" in r.stdout
    assert "T.gemm" in r.stdout  # print_source_code: the CPU target's source is the kernel's IR
