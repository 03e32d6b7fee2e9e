"""What TileLang programs import besides the language, as tegula's own code.

``alias_tilelang()`` makes ``import tilelang`` mean tegula in this process (``python -m tegula
run`` does it for a whole program). The helper modules live here and are also importable at the
paths TileLang programs use (``tegula.testing`` is ``tilelang.testing`` under the alias):

==================  ====================================================================
``testing``         pytest skip marks (``requires_cuda``...), ``main``, seeds, regression scripts
``profiler``        module-level ``do_bench``, ``Profiler``, ``TensorSupplyType``
``utils``           ``get_tensor_supply``, ``torch_assert_close`` (``tilelang.utils.tensor``)
``carver``          GPU descriptions (``carver.arch.CUDA``, ``driver``) and GEMM tile hints
``tvm``             a small namespace for what programs touch of TVM (not a TVM)
``math``            ``cdiv``, ``next_power_of_2``...
``callback``        ``engine.callback.register_cuda_postproc_callback``
``datatype``        ``DataType``: bits and lanes of a dtype name
==================  ====================================================================

This package sits at the top of tegula's layers: it imports the others, none imports it.
"""
from tegula.compat.alias import alias_tilelang, is_aliased, unalias_tilelang

__all__ = ["alias_tilelang", "unalias_tilelang", "is_aliased"]
