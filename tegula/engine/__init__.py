"""``tilelang.engine``: ``engine.param.KernelParam`` and ``engine.callback`` (CUDA source post-processing)."""
from tegula.engine import callback, param  # noqa: F401
