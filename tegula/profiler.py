"""``tilelang.profiler``: the module :mod:`tegula.compat.profiler` under the path TileLang programs import."""
import sys

from tegula.compat import profiler as _impl

sys.modules[__name__] = _impl
