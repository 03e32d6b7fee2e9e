"""``tilelang.cuda``: what TileLang programs import for hand-written CUDA tensor-core code
(:mod:`tegula.cuda.intrinsics`)."""
