"""Typed keys of Kernel.annotations (tegula/ir/annotations.py): the passes read and write through
them, and the IR verifier reports a value of the wrong shape under the key's name."""
import dataclasses

import pytest

import tegula.language as T
from tegula.backends.cuda.pipeline import lower
from tegula.ir.annotations import CLUSTER, KERNEL_KEYS, SMEM_BYTES, SMEM_OFFSETS, SWIZZLE
from tegula.ir.stmt import Kernel, PrimFunc
from tegula.ir.verify import well_formed
from tegula.target import Target


def _gemm(swizzle: bool):
    @T.prim_func
    def main(A: T.Tensor((256, 256), "float16"), B: T.Tensor((256, 256), "float16"),
             C: T.Tensor((256, 256), "float32")):
        with T.Kernel(4, 4, threads=128) as (bx, by):
            A_s = T.alloc_shared((64, 32), "float16")
            B_s = T.alloc_shared((32, 64), "float16")
            C_l = T.alloc_fragment((64, 64), "float32")
            if swizzle:
                T.use_swizzle(2)
            T.clear(C_l)
            for k in T.Pipelined(8, num_stages=2):
                T.copy(A[by * 64, k * 32], A_s)
                T.copy(B[k * 32, bx * 64], B_s)
                T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C[by * 64, bx * 64])

    return main


def _kernel(f: PrimFunc) -> Kernel:
    return f.body if isinstance(f.body, Kernel) else f.body.stmts[0]


def _with(f: PrimFunc, **ann) -> PrimFunc:
    k = _kernel(f)
    return dataclasses.replace(f, body=dataclasses.replace(k, annotations={**k.annotations, **ann}))


def test_lowered_kernels_hold_well_shaped_annotations():
    for arch in ("sm_80", "sm_90a"):
        low = lower(_gemm(True), Target("cuda", arch), {})
        k = _kernel(low)
        assert SWIZZLE.get(k.annotations) == (2, "row")
        assert SMEM_BYTES.get(k.annotations) > 0 and SMEM_OFFSETS.get(k.annotations)
        assert all(key.problem(k.annotations) is None for key in KERNEL_KEYS)
        assert well_formed(low) == []


@pytest.mark.parametrize("key, bad", [(SWIZZLE, (2, "diagonal")), (CLUSTER, (2, 0)), (SMEM_BYTES, -4),
                                      (SMEM_OFFSETS, {"x": 1.5})])
def test_a_badly_shaped_annotation_is_reported_by_its_key(key, bad):
    problems = well_formed(_with(_gemm(False), **{key.name: bad}))
    assert any(f"annotation {key.name!r} must be {key.shape}" in p for p in problems), problems


def test_keys_are_the_printed_annotation_names():
    s = lower(_gemm(True), Target("cuda", "sm_80"), {}).script()
    assert 'T.use_swizzle(2, order="row")' in s
    assert f"# annotation {SMEM_BYTES.name} = 16384" in s and f"# annotation {SMEM_OFFSETS.name} = " in s
    assert {k.name for k in KERNEL_KEYS} >= {"cluster", "swizzle", "layout_map", "tma_maps", "smem_offsets",
                                            "smem_bytes"}
