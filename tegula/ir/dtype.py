"""Data types: one immutable ``DType`` per element type, with its numpy and C++ spellings.

Users give dtypes as strings (``"float16"``), as ``T.float16`` style names, or as numpy / torch
dtypes; :func:`as_dtype` turns all of them into the canonical ``DType``.
"""
from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

from tegula.ir import hooks


class DType(str):
    """An element type: ``name`` is canonical (``"float16"``), ``kind`` is float/int/uint/bool.

    A ``DType`` is a ``str`` (its canonical name), as TileLang's dtypes are: it works wherever a
    dtype string does (``getattr(torch, T.bfloat16)``, ``dtype == "float16"``, dict keys).
    ``T.dtype`` is this class: ``T.dtype(x)`` gives the ``DType`` of a string, numpy dtype or
    torch dtype, and ``dtype: T.dtype = T.float16`` annotates a parameter. Instances are
    immutable and there is one per element type.
    """

    name: str
    kind: str
    bits: int
    np_dtype: Any
    ctype: str

    def __new__(cls, name: Any, kind: Any = None, bits: int = 0, np_dtype: Any = None,
                ctype: str = "") -> "DType":
        if kind is None:  # ``T.dtype(x)``: the dtype x names
            return as_dtype(name)
        self = super().__new__(cls, name)
        for k, v in (("name", name), ("kind", kind), ("bits", bits), ("np_dtype", np_dtype),
                     ("ctype", ctype)):
            object.__setattr__(self, k, v)
        return self

    def __setattr__(self, key: str, value: Any) -> None:
        raise AttributeError(f"DType {self.name} is immutable")

    def __reduce__(self) -> Any:
        return (as_dtype, (self.name,))

    def __copy__(self) -> "DType":
        return self

    def __deepcopy__(self, memo: Any) -> "DType":
        return self

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_int(self) -> bool:
        return self.kind in ("int", "uint")

    @property
    def is_bool(self) -> bool:
        return self.kind == "bool"

    @property
    def itemsize(self) -> int:
        return max(1, self.bits // 8)

    @property
    def bytes(self) -> int:
        """Bytes of one element (TileLang's ``dtype.bytes``): ``T.float16.bytes == 2``."""
        return self.itemsize

    @property
    def np(self) -> np.dtype:
        return np.dtype(self.np_dtype)

    @property
    def compute_np(self) -> np.dtype:
        """The numpy dtype arithmetic is done in: narrow floats compute in float32 and round back."""
        if self.is_float and self.bits < 32:
            return np.dtype(np.float32)
        return self.np

    def as_torch(self) -> Any:
        """The matching ``torch.dtype`` (needs torch)."""
        import torch

        name = _TORCH_NAMES.get(self.name, self.name)
        t = getattr(torch, name, None)
        if t is None:
            raise ValueError(f"dtype {self.name} has no torch equivalent")
        return t

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"T.{self.name}"

    # ``T.float16(3.0)`` builds a constant of that type, as in TileLang.
    def __call__(self, value: Any = 0) -> Any:
        return hooks.cast(self, value)


_TORCH_NAMES = {"float8_e4m3": "float8_e4m3fn", "bool": "bool"}


_TABLE = [
    DType("bool", "bool", 8, np.bool_, "bool"),
    DType("int8", "int", 8, np.int8, "signed char"),
    DType("int16", "int", 16, np.int16, "short"),
    DType("int32", "int", 32, np.int32, "int"),
    DType("int64", "int", 64, np.int64, "long long"),
    DType("uint8", "uint", 8, np.uint8, "unsigned char"),
    DType("uint16", "uint", 16, np.uint16, "unsigned short"),
    DType("uint32", "uint", 32, np.uint32, "unsigned int"),
    DType("uint64", "uint", 64, np.uint64, "unsigned long long"),
    DType("int4", "int", 4, ml_dtypes.int4, "signed char"),
    DType("uint4", "uint", 4, ml_dtypes.uint4, "unsigned char"),
    DType("float4_e2m1fn", "float", 4, ml_dtypes.float4_e2m1fn, "unsigned char"),
    DType("float8_e4m3", "float", 8, ml_dtypes.float8_e4m3fn, "__nv_fp8_e4m3"),
    DType("float8_e5m2", "float", 8, ml_dtypes.float8_e5m2, "__nv_fp8_e5m2"),
    DType("float16", "float", 16, np.float16, "half_t"),
    DType("bfloat16", "float", 16, ml_dtypes.bfloat16, "bfloat16_t"),
    DType("float32", "float", 32, np.float32, "float"),
    DType("float64", "float", 64, np.float64, "double"),
]
# An opaque address (TVM's "handle", ``T.ptr``): 64 bits, no arithmetic. Not an element type of
# ALL_DTYPES: tensors of addresses are passed as int64 tensors.
handle = DType("handle", "handle", 64, np.int64, "void*")
_BY_NAME = {d.name: d for d in _TABLE}
_BY_NAME["handle"] = handle
# fp8 e8m0 (exponent only, no sign: the block scales of MX formats). Not in ALL_DTYPES, which the
# generic arithmetic tests walk: it has no zero and no negatives, so it is a storage and scale type.
float8_e8m0fnu = DType("float8_e8m0fnu", "float", 8, ml_dtypes.float8_e8m0fnu, "__nv_fp8_e8m0")
_BY_NAME["float8_e8m0fnu"] = float8_e8m0fnu
_EXTRA = (float8_e8m0fnu,)
_ALIASES = {
    "float": "float32", "half": "float16", "double": "float64", "int": "int32", "uint": "uint32",
    "float8_e4m3fn": "float8_e4m3", "e4m3_float8": "float8_e4m3", "e5m2_float8": "float8_e5m2",
    "bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "fp64": "float64",
    # TileLang's tfloat32 tensors are float32 tensors whose tensor-core products round operands to
    # tf32 (10-bit mantissa); tegula stores and computes them as float32 (at least tf32's precision)
    "tfloat32": "float32",
}

bool_ = _BY_NAME["bool"]
int8, int16, int32, int64 = (_BY_NAME[n] for n in ("int8", "int16", "int32", "int64"))
uint8, uint16, uint32, uint64 = (_BY_NAME[n] for n in ("uint8", "uint16", "uint32", "uint64"))
float8_e4m3, float8_e5m2 = _BY_NAME["float8_e4m3"], _BY_NAME["float8_e5m2"]
float16, bfloat16, float32, float64 = (_BY_NAME[n] for n in ("float16", "bfloat16", "float32", "float64"))
int4, uint4, float4_e2m1fn = _BY_NAME["int4"], _BY_NAME["uint4"], _BY_NAME["float4_e2m1fn"]

ALL_DTYPES: tuple[DType, ...] = tuple(_TABLE)


def as_dtype(x: Any) -> DType:
    """Canonical ``DType`` for a string, ``DType``, numpy dtype/type or torch dtype.

    Raises ``ValueError`` for an unknown name, ``TypeError`` for something that is no dtype.
    """
    if isinstance(x, DType):
        return x
    if isinstance(x, str):
        name = _ALIASES.get(x, x)
        if name in _BY_NAME:
            return _BY_NAME[name]
        raise ValueError(f"unknown dtype {x!r}; expected one of {', '.join(_BY_NAME)}")
    if x is bool:
        return bool_
    if x is int:
        return int32
    if x is float:
        return float32
    mod = type(x).__module__
    if mod.startswith("torch"):
        name = str(x).replace("torch.", "")
        return as_dtype({"float8_e4m3fn": "float8_e4m3", "half": "float16"}.get(name, name))
    try:
        npd = np.dtype(x)
    except TypeError:
        raise TypeError(f"expected a dtype, got {type(x).__name__} {x!r}") from None
    for d in (*_TABLE, *_EXTRA):
        if np.dtype(d.np_dtype) == npd:
            return d
    raise ValueError(f"numpy dtype {npd} has no tegula equivalent")


def promote(a: DType, b: DType) -> DType:
    """The dtype of a binary operation on ``a`` and ``b``: floats win over ints, wider wins."""
    if a == b:
        return a
    rank = {"bool": 0, "uint": 1, "int": 2, "float": 3}
    if rank[a.kind] != rank[b.kind]:
        return a if rank[a.kind] > rank[b.kind] else b
    if a.bits != b.bits:
        return a if a.bits > b.bits else b
    # float16 vs bfloat16 (or the two fp8 kinds): neither holds the other, go to float32.
    return float32 if a.is_float else a
