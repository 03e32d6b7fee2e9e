"""The Analyzer's tile model: tile bytes follow the configuration's reuse, DRAM bytes are each
buffer once, block-dependent trip counts are counted block by block, occupancy and waves come from
the block's footprint, and the predictions stay within 25% of the measured H200 times committed
in benchmarks/results (BENCHMARKS.md, "The Analyzer against the H200")."""
import math
import os
import sys

import pytest

import tegula.language as T
from tegula.tools import Analyzer

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "examples"))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
import flash_attention as fa  # noqa: E402
import gemm as gm  # noqa: E402


@pytest.mark.parametrize("bm,bn,bk,stages", [(128, 256, 64, 3), (128, 128, 32, 2), (64, 64, 32, 4)])
def test_gemm_tile_bytes_follow_the_tiles_and_dram_counts_each_buffer_once(bm, bn, bk, stages):
    M = N = K = 2048
    r = Analyzer.analysis(gm.matmul.get_tir(M, N, K, bm, bn, bk, stages, 256), "H200")
    blocks = (M // bm) * (N // bn)
    assert r.blocks == blocks and r.total_flops == 2 * M * N * K
    assert r.total_global_bytes == blocks * (K // bk) * (bm * bk + bk * bn) * 2 + M * N * 2
    assert r.dram_bytes == (M * K + K * N + M * N) * 2
    assert r.terms["smem_per_block"] == (bm * bk + bk * bn) * 2 * stages
    per_sm = min(227 * 1024 // r.terms["smem_per_block"], 65536 // (256 * r.terms["regs_per_thread"]), 8)
    assert r.blocks_per_sm == min(per_sm, math.ceil(blocks / 132))
    assert r.waves == math.ceil(blocks / (132 * r.blocks_per_sm))
    assert r.estimated_time == pytest.approx(max(r.waves * r.blocks_per_sm * r.block_time, r.dram_time))


def test_bigger_tiles_reuse_more_and_the_bound_is_not_dram_for_a_large_gemm():
    small = Analyzer.analysis(gm.matmul.get_tir(4096, 4096, 4096, 64, 64, 32, 3, 128), "H200")
    big = Analyzer.analysis(gm.matmul.get_tir(4096, 4096, 4096, 128, 256, 64, 3, 256), "H200")
    assert big.total_global_bytes * 2.5 < small.total_global_bytes   # (1/128 + 1/256) vs (1/64 + 1/64)
    assert big.estimated_time < small.estimated_time
    assert {small.bound, big.bound} <= {"compute", "L2"}   # with reuse, DRAM never bounds 4096^3
    assert "blocks" in big.explain() and "predicted" in big.explain()


def test_causal_attention_counts_each_block_its_own_trip_count():
    b, h, s, d, bm, bn = 1, 2, 1024, 64, 128, 128
    full = Analyzer.analysis(fa.flash_attention(b, h, s, d, False, 1, bm, bn, 2, 256), "H200")
    causal = Analyzer.analysis(fa.flash_attention(b, h, s, d, True, 1, bm, bn, 2, 256), "H200")
    n = s // bm
    per_step = 2 * (2 * bm * bn * d)
    assert full.total_flops == b * h * n * n * per_step
    assert causal.total_flops == b * h * (n * (n + 1) // 2) * per_step
    # exp2 of every score, and of the rescale of every row, per key block
    assert causal.sfu_ops == b * h * (n * (n + 1) // 2) * (bm * bn + bm)
    assert causal.estimated_time < full.estimated_time


def test_elementwise_without_reuse_is_dram_bound_and_a_dynamic_extent_needs_its_value():
    @T.prim_func
    def copy2(A: T.Tensor((8192, 8192), "float16"), B: T.Tensor((8192, 8192), "float16")):
        with T.Kernel(8192 // 64, 8192 // 64, threads=128) as (bx, by):
            for i, j in T.Parallel(64, 64):
                B[by * 64 + i, bx * 64 + j] = A[by * 64 + i, bx * 64 + j] * 2.0
    r = Analyzer.analysis(copy2, "H200")
    assert r.total_flops == 0 and r.dram_bytes == r.total_global_bytes == 2 * 8192 * 8192 * 2
    assert r.bound == "memory" and r.estimated_time == pytest.approx(r.dram_bytes / 4800e9)


def test_predictions_are_within_25_percent_of_the_measured_h200_times():
    import analyzer_vs_h200

    rows = analyzer_vs_h200.compare()
    assert len(rows) == 14   # 6 GEMM and 8 attention rows of the final tree's run
    worst = max(rows, key=lambda r: abs(r["ratio"] - 1))
    assert abs(worst["ratio"] - 1) <= 0.25, (worst["label"], worst["ratio"])
