"""``tilelang.engine.param``: the module :mod:`tegula.runtime.params` under the path TileLang programs import."""
import sys

from tegula.runtime import params as _impl

sys.modules[__name__] = _impl
