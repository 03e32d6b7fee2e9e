"""``tilelang.contrib``: the helper modules TileLang programs import from it (``nvcc``)."""
from tegula.contrib import nvcc  # noqa: F401
