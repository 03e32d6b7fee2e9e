"""Before/after checks of individual CUDA passes (no compiler needed)."""
import pytest

import tegula
import tegula.language as T
from tegula.backends.cuda.pipeline import lower
from tegula.ir.stmt import Kernel
from tegula.target import Target
from tegula.transform import pipeline_for

SM80 = Target("cuda", "sm_80")


@T.prim_func
def three_tiles(X: T.Tensor((256,), "float32"), Y: T.Tensor((256,), "float32")):
    with T.Kernel(1, threads=128) as bx:
        a = T.alloc_shared((128,), "float32")
        b = T.alloc_shared((128,), "float32")
        c = T.alloc_shared((128,), "float32")
        T.copy(X[0:128], a)
        for i in T.Parallel(128):
            b[i] = a[i] * 2.0
        for i in T.Parallel(128):
            Y[i] = b[i]
        T.copy(X[128:256], c)
        for i in T.Parallel(128):
            Y[128 + i] = c[i]


def kernel_of(func):
    body = func.body
    return body if isinstance(body, Kernel) else body.stmts[0]


def test_shared_buffers_separated_by_a_barrier_share_bytes():
    k = kernel_of(lower(three_tiles, SM80, {}))
    off = {b.name: o for b, o in k.annotations["smem_offsets"].items()}
    assert off["c"] == off["a"]          # a is dead, and a barrier stands between
    assert off["b"] != off["a"]          # b is written while a is still read
    assert k.annotations["smem_bytes"] == 2 * 512


def test_barriers_where_threads_hand_over_shared_memory():
    src = lower(three_tiles, SM80, {}).script()
    # copy a -> (barrier) -> read a, write b -> (barrier) -> read b; c needs none before its copy
    assert src.count("T.sync_threads") == 3


def test_barrier_insertion_can_be_disabled():
    cfg = {tegula.PassConfigKey.TEGULA_DISABLE_BARRIER_INSERTION: True}
    assert "sync_threads" not in lower(three_tiles, SM80, cfg).script()
    assert "InsertBarriers" not in pipeline_for(SM80, cfg).names()


def test_pipeline_is_a_list_of_named_passes():
    names = pipeline_for(SM80).names()
    assert names[:5] == ["Simplify", "SpecializeMasks", "PipelineCopies", "InferLayouts", "LowerTileOps"]
    assert names.index("InsertBarriers") < names.index("PlanSharedMemory") < names.index("CheckResources")


def test_layout_conflict_between_two_gemms_names_buffer_and_lines():
    from tegula import errors

    @T.prim_func
    def two_policies(A: T.Tensor((64, 64), "float16"), C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            a = T.alloc_shared((64, 64), "float16")
            acc = T.alloc_fragment((64, 64), "float32")
            T.copy(A, a)
            T.gemm(a, a, acc, policy=T.GemmWarpPolicy.FullRow)
            T.gemm(a, a, acc, policy=T.GemmWarpPolicy.FullCol)
            T.copy(acc, C)

    with pytest.raises(errors.LayoutError) as ei:
        lower(two_policies, SM80, {})
    msg = str(ei.value)
    assert "'acc'" in msg and "test_passes.py:" in msg and "MmaLayout" in msg


def test_print_on_device_prints_message_block_and_value(tmp_path):
    from tegula import config
    from tegula.backends.cuda.compiler import available_backends

    @T.prim_func
    def show(A: T.Tensor((4,), "float16")):
        with T.Kernel(2, threads=32) as bx:
            T.print(A[bx], msg="A[bx]")

    src = lower(show, SM80, {}).script()
    assert "fmt='A[bx] block (%d, %d, %d): %g\\n'" in src
    if available_backends():
        with config.override(cache_dir=str(tmp_path)):
            k = tegula.compile(show, target="cuda:sm_80")
        assert 'printf("A[bx] block (%d, %d, %d): %g\\n", bx, 0, 0, (double)tl::cast<float>(A[bx]))' in k.get_kernel_source()
