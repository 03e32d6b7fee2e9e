"""``tilelang.engine.callback``: the module :mod:`tegula.compat.callback` under the path TileLang programs import."""
import sys

from tegula.compat import callback as _impl

sys.modules[__name__] = _impl
