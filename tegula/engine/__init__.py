"""``tilelang.engine``: ``engine.lower`` (build a prim_func, get its source), ``engine.param.KernelParam``
and ``engine.callback`` (CUDA source post-processing)."""
from tegula.engine import callback, param  # noqa: F401
from tegula.engine.lower import CompiledArtifact, lower  # noqa: F401
