"""``T.dtypes``: the dtype objects of the ``T`` namespace, and ``as_dtype`` for names."""
from tegula.ir.dtype import (ALL_DTYPES, DType, as_dtype, bfloat16, bool_, float8_e4m3,  # noqa: F401
                             float8_e5m2, float16, float32, float64, int8, int16, int32, int64,
                             uint8, uint16, uint32, uint64)

float8_e4m3fn = float8_e4m3
bool = bool_  # noqa: A001
dtype = DType  # TileLang's tilelang.language.dtypes.dtype: T.dtype


def _torch_dtype_to_str() -> dict:
    """``{torch.float16: "float16", ...}`` for every dtype tegula and torch share (TileLang's
    ``tilelang.language.dtypes._TORCH_DTYPE_TO_STR``, which host code uses to name a tensor's
    dtype); empty without torch."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        return {}
    out = {}
    for d in ALL_DTYPES:
        try:
            out[d.as_torch()] = d.name if d.name != "float8_e4m3" else "float8_e4m3fn"
        except (ValueError, AttributeError):
            continue
    return out


def __getattr__(name: str):  # the table needs torch: built on first use
    if name == "_TORCH_DTYPE_TO_STR":
        table = globals()["_TORCH_DTYPE_TO_STR"] = _torch_dtype_to_str()
        return table
    raise AttributeError(f"module 'tegula.language.dtypes' has no attribute {name!r}")
