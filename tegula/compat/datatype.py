"""``tilelang.DataType`` / ``tvm.DataType``: a dtype's kind, bits and lanes, from a name.

TileLang programs ask it how wide a type is (``DataType("float16").bits``) to size vectors.
Names tegula cannot compute in (packed ``int4``, ``float4_e2m1fn``...) are still described.
"""
from __future__ import annotations

import re
from typing import Any

from tegula.ir import dtype as dt

_NAME = re.compile(r"^(bool|int|uint|float|bfloat)(\d+)?(_[a-z0-9]+)?(?:x(\d+))?$")
_CODES = {"int": 0, "uint": 1, "float": 2, "bfloat": 4, "bool": 1}


class DataType:
    """``DataType(x)`` for a dtype name, a ``T.*`` dtype, or a numpy / torch dtype.

    Attributes: ``bits`` (of one lane), ``lanes``, ``type_code`` (0 int, 1 uint, 2 float,
    4 bfloat), ``name``; ``str()`` gives the name back. Raises ValueError for other names."""

    def __init__(self, x: Any):
        if isinstance(x, DataType):
            x = x.name
        if not isinstance(x, str):
            x = dt.as_dtype(x).name
        name = str(x).strip()
        canon = {"float8_e4m3": "float8_e4m3fn", "half": "float16", "float": "float32",
                 "double": "float64", "int": "int32"}.get(name, name)
        m = _NAME.match(canon)
        if m is None:
            raise ValueError(f"unknown dtype {x!r}")
        kind, bits, _, lanes = m.groups()
        self.name = name
        self.kind = kind
        self.bits = 1 if kind == "bool" and bits is None else int(bits or 32)
        self.lanes = int(lanes or 1)
        self.type_code = _CODES[kind]

    def is_float(self) -> bool:
        return self.kind in ("float", "bfloat")

    def is_int(self) -> bool:
        return self.kind == "int"

    def is_uint(self) -> bool:
        return self.kind in ("uint", "bool")

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"DataType({self.name!r})"

    def __eq__(self, other: object) -> bool:
        try:
            return str(DataType(other)) == self.name  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return NotImplemented

    def __hash__(self) -> int:
        return hash(self.name)
