"""Thread-level kernels (``T.get_thread_binding``) on target cpu run as the emulator runs them,
but without a GPU's shared-memory limit: the interpreter has none (a tile-level kernel of the same
size runs there). The CUDA targets keep the limit of their arch."""
import numpy as np
import pytest

import tegula
import tegula.language as T
from tegula.errors import ResourceError

N = 180 * 1024 // 4  # 180 KiB of float32 in shared memory: more than sm_80's 163 KiB


@T.prim_func
def _big_shared(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
    with T.Kernel(1, threads=128) as _:
        _tx = T.get_thread_binding()
        S = T.alloc_shared((N,), "float32")
        for i in T.Parallel(N):
            S[i] = A[i] * 2.0
        for i in T.Parallel(N):
            B[i] = S[N - 1 - i] + 1.0


def test_cpu_runs_a_thread_level_kernel_past_sm80_shared_memory(rng):
    a = rng.standard_normal(N).astype(np.float32)
    b = np.full(N, np.nan, np.float32)
    tegula.compile(_big_shared, target="cpu")(a, b)
    np.testing.assert_allclose(b, a[::-1].astype(np.float64) * 2 + 1, rtol=1e-6)


@pytest.mark.parametrize("target", ["cuda-emu", "cuda-emu:sm_80"])
def test_gpu_targets_keep_the_limit(target):
    with pytest.raises(ResourceError, match="bytes of shared memory per block but sm_80 allows 166912"):
        tegula.compile(_big_shared, target=target)


def test_the_interpreters_target_carries_the_interpret_option():
    """The cpu build of a thread-level kernel lowers for Target("cuda-emu", "sm_80",
    interpret=True); the pipeline of that target has CheckResources(interpret=True), of the plain
    one CheckResources(interpret=False), with no pass swapped by hand."""
    from tegula.target import Target
    from tegula.transform import pipeline_for

    host = pipeline_for(Target("cuda-emu", "sm_80", interpret=True))
    assert host["CheckResources"].options == {"arch": "sm_80", "interpret": True}
    assert str(host.target) == "cuda:sm_80"
    assert pipeline_for("cuda-emu")["CheckResources"].options == {"arch": "sm_80", "interpret": False}


def test_the_interpreters_build_counts_no_shared_memory(monkeypatch, rng):
    """With no limit to check, CheckResources(interpret=True) does not walk the kernel for its
    static shared scratch either."""
    from tegula.backends.cuda.passes import check_resources as cr

    def walked(k):
        raise AssertionError("static_smem walked a kernel the interpreter runs")
    monkeypatch.setattr(cr, "static_smem", walked)
    a = rng.standard_normal(N).astype(np.float32)
    b = np.full(N, np.nan, np.float32)
    tegula.compile(_big_shared, target="cpu")(a, b)
    np.testing.assert_allclose(b, a[::-1].astype(np.float64) * 2 + 1, rtol=1e-6)
    assert cr.check_resources(_big_shared, "sm_90a", interpret=True) is _big_shared
    with pytest.raises(AssertionError, match="static_smem walked"):  # a GPU's build counts it
        cr.check_resources(_big_shared, "sm_90a")
