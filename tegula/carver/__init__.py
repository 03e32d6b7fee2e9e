"""``tilelang.carver``: GPU descriptions and GEMM tile hints (see :mod:`tegula.compat.carver`)."""
from tegula.carver import arch, roller, template  # noqa: F401
from tegula.compat.carver import CDNA, CUDA, Hint, MatmulTemplate, TileDevice, auto_infer_current_arch  # noqa: F401
