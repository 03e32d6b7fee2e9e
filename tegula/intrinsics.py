"""``tilelang.intrinsics``: the module :mod:`tegula.compat.intrinsics` under the path TileLang-Ascend programs import."""
import sys

from tegula.compat import intrinsics as _impl

sys.modules[__name__] = _impl
