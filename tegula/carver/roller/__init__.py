"""``tilelang.carver.roller``: hints and rasterization plans (see :mod:`tegula.compat.carver`)."""
from tegula.carver.roller import rasterization  # noqa: F401
from tegula.compat.carver import Hint  # noqa: F401
