"""OrderBlocks (sm_90a): kernels whose pipelined loop grows with blockIdx.x (causal attention)
number their blocks the other way round, longest first; results are unchanged."""
import sys
from pathlib import Path

import numpy as np

import tegula
from tegula.backends.cuda.pipeline import lower
from tegula.passconfig import PassConfigKey
from tegula.target import Target

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "transform"))
from test_wgmma import _ex, _gemm  # noqa: E402
from golden_cases import triangle  # noqa: E402

SM90 = Target("cuda", "sm_90a")


def _q0(func, target=SM90, configs=None) -> list:
    s = lower(func, target, configs or {}).script()
    return [line.strip() for line in s.splitlines() if line.strip().startswith("q0 = ")]


def test_causal_attention_starts_its_longest_blocks_first():
    fa = _ex("flash_attention")
    assert _q0(fa.flash_attention(1, 2, 512, 64, True, 1, 128, 64, 2, 128)) == ["q0 = 384 - bx * 128"]
    # every query block of full attention runs as long: left in order
    assert _q0(fa.flash_attention(1, 2, 512, 64, False, 1, 128, 64, 2, 128)) == ["q0 = bx * 128"]


def test_off_with_its_pass_config_on_sm80_and_for_gemm():
    fa = _ex("flash_attention")
    f = fa.flash_attention(1, 2, 512, 64, True, 1, 128, 64, 2, 128)
    assert _q0(f, configs={PassConfigKey.TEGULA_DISABLE_BLOCK_ORDER: True}) == ["q0 = bx * 128"]
    assert _q0(f, Target("cuda", "sm_80")) == ["q0 = bx * 128"]
    assert "blocks_reversed" not in lower(_gemm(512, 512, 512, 128, 128, 32, 3, 128), SM90, {}).script()


def test_reversed_blocks_compute_the_same_on_the_emulator(rng):
    k = tegula.compile(triangle(), target="cuda-emu:sm_90a")
    x = rng.standard_normal((256, 32)).astype(np.float32)
    y = rng.standard_normal((256, 32)).astype(np.float32)
    k(x, y)
    ref = np.concatenate([x.astype(np.float64).reshape(4, 64, 32)[:b + 1].sum(0) for b in range(4)])
    assert np.abs(y - ref).max() < 1e-4
