"""TIR-level spellings TileLang programs use: ``T.uint``, ``T.alloc_buffer``, bit-level decoding
helpers written with ``tvm.tirx`` (shifts, masks, ``reinterpret``), on every target.

Kernel tests run on the interpreter (``cpu``), the emulator of the CUDA output (``cuda-emu``) and,
marked ``gpu``, a GPU; ``built()`` also compiles each kernel for sm_80 and sm_90a.
"""
from __future__ import annotations

import numpy as np
import pytest

import tegula
import tegula.language as T
from tegula.compat import tvm
from test_features import built, target, to_device, to_host  # noqa: F401 (fixture)


def test_uint_is_uint32():
    assert T.uint is T.uint32 and T.dtype("uint") is T.uint32 and T.dtype("int") is T.int32
    assert T.uint == "uint32"


# -- bit-level decoding: 4-bit fields of a byte to float16 ------------------------------------

def _nibble_to_f16(val, pos):
    """s1e2m1 in ``val``'s nibble ``pos`` as float16 bits (exponent rebased by 14), the way
    dequantization helpers are written with tvm.tirx."""
    u16 = T.uint16
    f4 = (val >> (pos.astype(u16) * tvm.tirx.const(4, u16))) & tvm.tirx.const(15, u16)
    s = f4 >> tvm.tirx.const(3, u16)
    e = ((f4 & tvm.tirx.const(6, u16)) >> tvm.tirx.const(1, u16)) + tvm.tirx.const(14, u16)
    m = f4 & tvm.tirx.const(1, u16)
    return tvm.tirx.reinterpret(T.float16, ((e | (s << tvm.tirx.const(5, u16))) << tvm.tirx.const(10, u16)
                                            | m << tvm.tirx.const(9, u16)).astype(u16))


def decode_kernel(N, K, block_N=32):
    @T.prim_func
    def decode(B: T.Tensor((N, K // 2), T.uint8), C: T.Tensor((N, K), T.float16)):
        with T.Kernel(T.ceildiv(N, block_N), threads=128) as bx:
            B_local = T.alloc_fragment((block_N, K // 2), T.uint8)
            C_local = T.alloc_fragment((block_N, K), T.float16)
            T.copy(B[bx * block_N, 0], B_local)
            for i, j in T.Parallel(block_N, K):
                C_local[i, j] = _nibble_to_f16(B_local[i, j // 2], j % 2)
            T.copy(C_local, C[bx * block_N, 0])

    return decode


def _decode_ref(b):
    f4 = np.stack((b & 15, b >> 4), axis=-1).reshape(b.shape[0], -1).astype(np.uint16)
    bits = (((f4 & 6) >> 1) + 14 | (f4 >> 3) << 5) << 10 | (f4 & 1) << 9
    return bits.astype(np.uint16).view(np.float16)


def test_nibble_decode_through_reinterpret(target, rng):
    N, K = 64, 64
    k = built(decode_kernel(N, K), target, out_idx=[1])
    b = rng.integers(0, 256, (N, K // 2), dtype=np.uint8)
    (db,) = to_device(target, b)
    np.testing.assert_array_equal(to_host(k(db)).view(np.uint16), _decode_ref(b).view(np.uint16))


# -- T.alloc_buffer --------------------------------------------------------------------------

def two_pass_sum_kernel(M, N, S):
    @T.prim_func
    def two_pass(X: T.Tensor((M, N), "float32"), Y: T.Tensor((M,), "float32")):
        part = T.alloc_buffer((M, S), "float32")  # global scratch between the two kernels
        with T.Kernel(M, S, threads=128) as (bm, bs):
            tile = T.alloc_buffer((N // S,), "float32", scope="local.fragment")
            stage = T.alloc_buffer((N // S,), "float32", scope="shared")
            acc = T.alloc_fragment((1,), "float32")
            T.copy(X[bm, bs * (N // S)], stage)
            T.copy(stage, tile)
            T.reduce_sum(tile, acc, dim=0)
            part[bm, bs] = acc[0]
        with T.Kernel(M, threads=128) as bm:
            row = T.alloc_fragment((S,), "float32")
            tot = T.alloc_fragment((1,), "float32")
            T.copy(part[bm, 0], row)
            T.reduce_sum(row, tot, dim=0)
            Y[bm] = tot[0]

    return two_pass


def test_alloc_buffer_scopes(target, rng):
    M, N, S = 8, 256, 4
    k = built(two_pass_sum_kernel(M, N, S), target, out_idx=[-1])
    x = rng.standard_normal((M, N)).astype(np.float32)
    (dx,) = to_device(target, x)
    np.testing.assert_allclose(to_host(k(dx)), x.astype(np.float64).sum(-1), rtol=1e-5, atol=1e-4)
    assert k.func.num_workspaces == 1


def test_alloc_buffer_unknown_scope_names_the_line():
    with pytest.raises(tegula.errors.KernelTypeError, match="unknown scope 'texture'") as e:
        @T.prim_func
        def bad(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=32):
                t = T.alloc_buffer((4,), "float32", scope="texture")  # noqa: F841
                A[0] = 1.0
    assert "test_lowlevel.py" in str(e.value) and "scope=\"texture\"" in str(e.value)
