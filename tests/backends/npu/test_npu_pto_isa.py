"""The optional external check: the emitted PTO C++ compiled against the CPU simulator of the
public PTO ISA repository (``PTO_ISA_ROOT``; clang++ 15+), run, and compared with the
interpreter. Skipped when no checkout is configured."""
import numpy as np
import pytest

import tegula
from tegula import config
from tegula.backends.npu import pto_sim

AUTO = {"tl.ascend_auto_sync": True}

pytestmark = pytest.mark.skipif(not config.settings.pto_isa_root,
                                reason="PTO_ISA_ROOT is not set (no PTO ISA checkout to check against)")


def _case(ascend_example, name, rng):
    ex = ascend_example(name)
    if name == "elementwise_add":
        f = ex.elementwise_add(128, 256)
        args = [rng.standard_normal((128, 256)).astype(np.float16) for _ in range(2)] + \
            [np.full((128, 256), np.nan, np.float16)]
    elif name == "softmax":
        f = ex.softmax(64, 128)
        args = [rng.standard_normal((64, 128)).astype(np.float16), np.full((64, 128), np.nan, np.float16)]
    elif name == "rmsnorm":
        f = ex.rmsnorm(64, 128)
        args = [rng.standard_normal(s).astype(np.float16) for s in ((64, 128), (1, 128))] + \
            [np.full((64, 128), np.nan, np.float16)]
    elif name == "gemm":
        # fp32 out: the simulator's TSTORE needs one element size on both sides (the NPU's
        # FixPipe converts fp32 -> fp16 on the way; the simulator does not model that)
        f = ex.gemm(128, 128, 128, num_stages=2, out_dtype="float32")
        args = [rng.standard_normal((128, 128)).astype(np.float16) for _ in range(2)] + \
            [np.full((128, 128), np.nan, np.float32)]
    elif name == "gemm_relu_950":
        f = ex.gemm_relu(128, 128, 128)
        args = [rng.standard_normal((128, 128)).astype(np.float16) for _ in range(2)] + \
            [np.zeros((128, 128), np.float32), np.full((128, 128), np.nan, np.float32)]
    else:  # W_S / W_O are fp32 workspaces, so every TSTORE keeps its element size
        f = ex.flash_attention(128, 64)
        g = 128 // 32
        args = [rng.standard_normal((128, 64)).astype(np.float16) for _ in range(3)] + \
            [np.zeros((g, 32, 32), np.float32), np.zeros((g, 32, 32), np.float16),
             np.zeros((g, 32, 64), np.float32), np.full((128, 64), np.nan, np.float16)]
    return f, args


@pytest.mark.parametrize("arch", ["a2a3", "a5"])
@pytest.mark.parametrize("name", ["elementwise_add", "softmax", "rmsnorm", "gemm", "gemm_relu_950",
                                  "flash_attention"])
def test_emitted_pto_matches_the_interpreter(ascend_example, tmp_path, name, arch):
    rng = np.random.default_rng()
    f, args = _case(ascend_example, name, rng)
    want = [a.copy() for a in args]
    tegula.compile(f, target="cpu")(*want)
    src = tegula.compile(f, target=f"ascend-pto:{arch}", pass_configs=AUTO).get_kernel_source()
    got = [a.copy() for a in args]
    pto_sim.run(f, src, got, config.settings.pto_isa_root, config.settings.pto_cxx, keep=str(tmp_path))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=5e-3, atol=5e-3)
