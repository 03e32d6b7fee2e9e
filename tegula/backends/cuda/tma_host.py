"""Tensor maps for TMA loads and stores, made on the host with ``cuTensorMapEncodeTiled``.

A map holds the tensor's address, so it is made per argument tensor: :class:`TmaEncoder` keeps
the bytes of the maps it made, keyed by (address, shape, strides), and a kernel called again on
the same tensors reuses them. Out-of-bounds parts of a box read as zeros.
"""
from __future__ import annotations

import ctypes
from typing import Any

from tegula.errors import ArgumentError
from tegula.backends.cuda.driver import check, driver

_DTYPES = {"float16": "FLOAT16", "bfloat16": "BFLOAT16", "float32": "FLOAT32", "int32": "INT32",
           "int8": "UINT8", "uint8": "UINT8", "float8_e4m3": "UINT8", "float8_e5m2": "UINT8"}
_CACHE_LIMIT = 256


def _shape_strides(x: Any, itemsize: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Shape and strides in bytes of a torch tensor or ``__cuda_array_interface__`` object."""
    if hasattr(x, "stride") and callable(x.stride):
        return tuple(int(d) for d in x.shape), tuple(int(s) * itemsize for s in x.stride())
    cai = x.__cuda_array_interface__
    shape = tuple(int(d) for d in cai["shape"])
    strides = cai.get("strides")
    if strides is None:
        acc, out = itemsize, []
        for d in reversed(shape):
            out.append(acc)
            acc *= d
        strides = tuple(reversed(out))
    return shape, tuple(int(s) for s in strides)


class TmaEncoder:
    """Encodes (and remembers) the tensor map ``m`` (a ``TmaMap``) for argument tensors."""

    def __init__(self, m: Any, name: str):
        self.m = m
        self.name = name
        self.cache: dict = {}

    def __call__(self, x: Any, ptr: int) -> bytes:
        itemsize = self.m.buffer.dtype.itemsize
        shape, strides = _shape_strides(x, itemsize)
        key = (ptr, shape, strides)
        got = self.cache.get(key)
        if got is None:
            if len(self.cache) >= _CACHE_LIMIT:
                self.cache.clear()
            got = self.cache[key] = self._encode(ptr, shape, strides, itemsize)
        return got

    def _encode(self, ptr: int, shape: tuple, strides: tuple, itemsize: int) -> bytes:
        drv = driver()
        if strides[-1] != itemsize or ptr % 16 or any(s % 16 for s in strides[:-1]):
            raise ArgumentError(
                f"'{self.name}' is read or written by TMA, which needs a 16-byte aligned address, a "
                f"contiguous last dimension and row strides that are multiples of 16 bytes (got address "
                f"{ptr:#x}, strides {strides} bytes)",
                hint="pass a contiguous tensor (.contiguous()), or build with pass config "
                     "tl.disable_tma_lower")
        dtype = getattr(drv.CUtensorMapDataType, f"CU_TENSOR_MAP_DATA_TYPE_{_DTYPES[self.m.buffer.dtype.name]}")
        rank = len(shape)
        dims = [drv.cuuint64_t(d) for d in reversed(shape)]
        gstrides = [drv.cuuint64_t(s) for s in reversed(strides[:-1])]
        box = [drv.cuuint32_t(b) for b in self.m.box]
        ones = [drv.cuuint32_t(1)] * rank
        swz = [drv.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_NONE, drv.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_32B,
               drv.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_64B,
               drv.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B][self.m.swizzle]
        tmap = check(drv.cuTensorMapEncodeTiled(
            dtype, rank, ptr, dims, gstrides, box, ones,
            drv.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE, swz,
            drv.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            drv.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
            f"cuTensorMapEncodeTiled({self.name}, box {self.m.box})")
        return ctypes.string_at(tmap.getPtr(), 128)
