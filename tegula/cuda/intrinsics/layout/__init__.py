"""``tilelang.cuda.intrinsics.layout``: index maps of tensor-core operands."""
from tegula.cuda.intrinsics.layout.utils import get_mma_micro_size, get_swizzle_layout  # noqa: F401
