"""``tilelang.cuda.intrinsics``: the tensor-core emitter (``macro.mma_macro_generator``) and the
layout helpers (``layout``) of hand-written mma kernels, as tegula's own code
(:mod:`tegula.language.mma_emitter`, :mod:`tegula.layout.mma`)."""
from tegula.cuda.intrinsics.layout.utils import get_mma_micro_size, get_swizzle_layout  # noqa: F401
from tegula.cuda.intrinsics.macro.mma_macro_generator import TensorCoreIntrinEmitter  # noqa: F401

__all__ = ["TensorCoreIntrinEmitter", "get_mma_micro_size", "get_swizzle_layout"]
