"""``tilelang.carver.roller.rasterization``: the module :mod:`tegula.compat.carver` under the path TileLang programs import."""
import sys

from tegula.compat import carver as _impl

sys.modules[__name__] = _impl
