"""Small kernels the tests of tegula.torch share, and the loader of examples/torch_ops.py."""
import importlib.util
import sys
from pathlib import Path

import tegula
import tegula.language as T

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def torch_ops_example():
    """examples/torch_ops.py as a module (examples is no package)."""
    name = "tegula_example_torch_ops"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, EXAMPLES / "torch_ops.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]


def eager_add(target="cpu", dtype="float32"):
    """``C = A + B`` of 1-d tensors of any length (an eager kernel, N a T.const symbol)."""

    @tegula.jit(target=target)
    def add(A, B, block=64):
        N = T.const("N")
        A: T.Tensor((N,), dtype)
        B: T.Tensor((N,), dtype)
        C = T.empty((N,), dtype)
        with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
            for i in T.Parallel(block):
                if bx * block + i < N:
                    C[bx * block + i] = A[bx * block + i] + B[bx * block + i]
        return C
    return add


def scale_rows(M, N, dtype="float32"):
    """``Y[i, j] = X[i, j] * X[i, j] * W[j]`` (a @T.prim_func; M may be a T.dynamic symbol)."""

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), W: T.Tensor((N,), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, 4), threads=128) as bx:
            for i, j in T.Parallel(4, N):
                if bx * 4 + i < M:
                    Y[bx * 4 + i, j] = X[bx * 4 + i, j] * X[bx * 4 + i, j] * W[j]
    return main


def axpy_inplace(N, dtype="float32"):
    """``Y += a * X`` in place (a @T.prim_func writing its input Y; ``a`` a scalar)."""

    @T.prim_func
    def main(X: T.Tensor((N,), dtype), Y: T.Tensor((N,), dtype), a: T.float32):
        with T.Kernel(T.ceildiv(N, 32), threads=32) as bx:
            for i in T.Parallel(32):
                if bx * 32 + i < N:
                    Y[bx * 32 + i] = Y[bx * 32 + i] + T.Cast(dtype, a) * X[bx * 32 + i]
    return main


def vec_add(N, dtype="float16", block=256):
    """``C = A + B`` of 1-d tensors (a @T.prim_func; C is a parameter the caller gives)."""

    @T.prim_func
    def main(A: T.Tensor((N,), dtype), B: T.Tensor((N,), dtype), C: T.Tensor((N,), dtype)):
        with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
            for i in T.Parallel(block):
                if bx * block + i < N:
                    C[bx * block + i] = A[bx * block + i] + B[bx * block + i]
    return main
