"""``tilelang.testing``: the module :mod:`tegula.compat.testing` under the path TileLang programs import."""
import sys

from tegula.compat import testing as _impl

sys.modules[__name__] = _impl
