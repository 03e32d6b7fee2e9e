"""``tilelang.cuda.intrinsics.macro.mma_macro_generator``: :mod:`tegula.language.mma_emitter`."""
from tegula.language.mma_emitter import TensorCoreIntrinEmitter  # noqa: F401

__all__ = ["TensorCoreIntrinEmitter"]
