"""``T.alloc_fragment(shape, dtype, "local")`` is a per-thread register array (TileLang's scope
argument), usable where block-level values go: loop extents, copy offsets, while conditions
(gemm_streamk's kernel); on the interpreter, cuda-emu and compiled for sm_80 / sm_90a."""
from __future__ import annotations

import numpy as np
import pytest

import tegula
import tegula.language as T
from tegula.backends.cuda.compiler import available_backends


def segments(G):
    @T.prim_func
    def seg(A: T.Tensor((3 * G * 32,), "float32"), B: T.Tensor((G * 32,), "float32")):
        with T.Kernel(G, threads=32) as pid:
            start = T.alloc_fragment((1,), "int32", "local")
            tile = T.alloc_shared((32,), "float32")
            acc = T.alloc_fragment((32,), "float32")
            start[0] = pid * 2
            T.clear(acc)
            for k in T.Pipelined(start[0] - pid, num_stages=2):  # pid tiles, from tile 2 * pid
                T.copy(A[(start[0] + k) * 32], tile)
                for i in T.Parallel(32):
                    acc[i] += tile[i]
            while start[0] < pid * 3:
                start[0] = start[0] + 1
            for i in T.Parallel(32):
                acc[i] += T.if_then_else(i == 0, T.cast(start[0], "float32"), 0.0)
            T.copy(acc, B[pid * 32])

    return seg


@pytest.mark.parametrize("target", ["cpu", "cuda-emu"])
def test_local_fragment_drives_loops_and_offsets(target, rng):
    G = 4
    f = segments(G)
    if target == "cpu" and available_backends():
        for arch in ("sm_80", "sm_90a"):
            assert "__global__" in tegula.compile(f, target=f"cuda:{arch}").get_kernel_source()
    a = rng.standard_normal(3 * G * 32).astype(np.float32)
    b = np.full(G * 32, np.nan, np.float32)
    tegula.compile(f, target=target)(a, b)
    ref = np.zeros((G, 32))
    for p in range(G):
        for k in range(p):
            ref[p] += a[(2 * p + k) * 32:(2 * p + k + 1) * 32]
        ref[p, 0] += max(2 * p, 3 * p)
    np.testing.assert_allclose(b.reshape(G, 32), ref, rtol=1e-5, atol=1e-5)


def test_fragment_scope_is_checked():
    with pytest.raises(tegula.errors.KernelTypeError, match="scope must be 'local.fragment' or 'local', got 'shared'"):
        @T.prim_func
        def bad(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=32):
                T.alloc_fragment((4,), "float32", "shared")
