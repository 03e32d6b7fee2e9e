"""``tilelang.math``: the module :mod:`tegula.compat.math` under the path TileLang programs import."""
import sys

from tegula.compat import math as _impl

sys.modules[__name__] = _impl
