"""``tilelang.profiler``: ``do_bench`` as a function, ``Profiler`` and ``TensorSupplyType``."""
from tegula.runtime.profiler import Profiler, TensorSupplyType, do_bench

__all__ = ["do_bench", "Profiler", "TensorSupplyType"]
