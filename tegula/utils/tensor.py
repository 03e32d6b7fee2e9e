"""``tilelang.utils.tensor``: the module :mod:`tegula.compat.utils` under the path TileLang programs import."""
import sys

from tegula.compat import utils as _impl

sys.modules[__name__] = _impl
