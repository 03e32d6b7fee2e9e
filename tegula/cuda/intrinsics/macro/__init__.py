"""``tilelang.cuda.intrinsics.macro``: emitters of warp-level code."""
