"""``T.dtypes``: the dtype objects of the ``T`` namespace, and ``as_dtype`` for names."""
from tegula.ir.dtype import (ALL_DTYPES, DType, as_dtype, bfloat16, bool_, float8_e4m3,  # noqa: F401
                             float8_e5m2, float16, float32, float64, int8, int16, int32, int64,
                             uint8, uint16, uint32, uint64)

float8_e4m3fn = float8_e4m3
bool = bool_  # noqa: A001
