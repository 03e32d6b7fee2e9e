"""``tilelang.contrib.nvcc``: the module :mod:`tegula.compat.nvcc` under the path TileLang programs import."""
import sys

from tegula.compat import nvcc as _impl

sys.modules[__name__] = _impl
