"""TileLang names users reach for outside the T namespace: TensorSupplyType, layout helpers,
disable_cache."""
import pytest

import tegula as tilelang
import tegula.language as T
from tegula import config, errors


def gemm(M=64, N=64, K=64, swizzle=True):
    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, 1, threads=128) as (bx, by):
            A_s = T.alloc_shared((M, K), "float16")
            B_s = T.alloc_shared((K, N), "float16")
            C_l = T.alloc_fragment((M, N), "float32")
            if swizzle:
                T.annotate_layout({A_s: tilelang.layout.make_swizzled_layout(A_s),
                                   B_s: tilelang.layout.make_swizzled_layout(B_s)})
            T.clear(C_l)
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, C_l)
            T.copy(C_l, C)

    return main


@pytest.mark.needs("torch")   # the profiler makes torch tensors when torch is there
def test_profiler_tensor_supply_types():
    k = tilelang.compile(gemm(), out_idx=[-1], target="cpu")
    ref = lambda a, b: a.double() @ b.double()  # noqa: E731
    for supply in (tilelang.TensorSupplyType.Integer, tilelang.TensorSupplyType.Normal,
                   tilelang.TensorSupplyType.Uniform):
        p = k.get_profiler(tensor_supply_type=supply)
        ins = p.make_inputs()
        if supply is tilelang.TensorSupplyType.Integer:
            assert all(float(x.float().abs().max()) <= 2 and float(x.float().abs().sum()) > 0 for x in ins)
        p.assert_allclose(ref, rtol=1e-3, atol=1e-3)
    with pytest.raises(errors.ConfigError, match="TensorSupplyType"):
        k.get_profiler(tensor_supply_type="normal")


def test_annotated_swizzle_is_used_and_runs(tmp_path):
    from tegula.backends.cuda.pipeline import lower
    from tegula.target import Target

    k = lower(gemm(), Target("cuda", "sm_80"), {})
    kern = k.body
    assert "Swizzled" in kern.annotations["shared_layouts"]["A_s"]
    # a tile whose rows cannot be swizzled is a clear error at the user's line
    with pytest.raises(errors.TegulaError) as ei:
        @T.prim_func
        def bad(A: T.Tensor((8, 3), "float16")):
            with T.Kernel(1) as bx:
                s = T.alloc_shared((8, 3), "float16")
                T.annotate_layout({s: tilelang.layout.make_swizzled_layout(s)})
    assert "test_compat.py:" in str(ei.value) and "swizzled layout" in str(ei.value)


def test_disable_cache():
    with config.override():
        tilelang.disable_cache()
        assert config.get().disable_cache
        tilelang.enable_cache()
        assert not config.get().disable_cache


@pytest.mark.needs("torch")   # the profiler makes torch tensors when torch is there
def test_profiler_allclose_tolerates_one_percent_of_mismatches_by_default(rng):
    k = tilelang.compile(gemm(), out_idx=[-1], target="cpu")
    p = k.get_profiler()
    ins = p.make_inputs()

    def off_by(n):
        def ref(a, b):
            want = (a.double() @ b.double()).numpy()
            want.reshape(-1)[:n] += 1.0
            return want
        return ref

    p.assert_allclose(off_by(40), input_tensors=ins)          # 40 of 4096: under 1%
    with pytest.raises(AssertionError, match="41 of 4096"):
        p.assert_allclose(off_by(41), input_tensors=ins)
    with pytest.raises(AssertionError, match="1 of 4096"):
        p.assert_allclose(off_by(1), input_tensors=ins, max_mismatched_ratio=0.0)
