"""``tilelang.cache``: the module :mod:`tegula.compat.cache` under the path TileLang programs import."""
import sys

from tegula.compat import cache as _impl

sys.modules[__name__] = _impl
