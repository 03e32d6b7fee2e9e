"""``tvm.tir``: older TVM's name of :mod:`tegula.compat.tvm.tirx` (the same module)."""
import sys

from tegula.compat.tvm import tirx as _tirx

sys.modules[__name__ + ".stmt_functor"] = _tirx.stmt_functor
sys.modules[__name__] = _tirx
