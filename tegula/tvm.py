"""``tilelang.tvm``: the module :mod:`tegula.compat.tvm` under the path TileLang programs import."""
import sys

from tegula.compat import tvm as _impl

sys.modules[__name__] = _impl
