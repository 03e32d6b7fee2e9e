"""The Ascend examples on the interpreter and the emulator of both machines, against float64."""
import pytest

TARGETS = ["cpu", "ascend-emu:a2a3", "ascend-emu:a5"]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("hand_sync", [True, False])
def test_elementwise_add(ascend_example, target, hand_sync):
    assert ascend_example("elementwise_add").main(target=target, hand_sync=hand_sync) < 4e-3


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("num_stages", [1, 2, 3])
def test_gemm(ascend_example, target, num_stages):
    assert ascend_example("gemm").main(M=128, N=64, K=96, target=target, num_stages=num_stages) < 2e-3


@pytest.mark.parametrize("target", TARGETS)
def test_softmax(ascend_example, target):
    assert ascend_example("softmax").main(M=32, N=64, target=target) < 2e-3


@pytest.mark.parametrize("target", TARGETS)
def test_flash_attention(ascend_example, target):
    assert ascend_example("flash_attention").main(S=64, D=32, target=target) < 1e-2


@pytest.mark.parametrize("target", TARGETS)
def test_rmsnorm(ascend_example, target):
    assert ascend_example("rmsnorm").main(M=32, N=64, target=target) < 2e-3


def test_every_ascend_example_is_tested():
    import pathlib

    names = sorted(p.stem for p in (pathlib.Path(__file__).resolve().parents[3] / "examples" / "ascend").glob("*.py"))
    assert names == ["elementwise_add", "flash_attention", "gemm", "gemm_relu_950", "rmsnorm",
                     "scheduling", "softmax"]   # scheduling: tests/backends/npu/test_npu_schedule.py


@pytest.mark.parametrize("target", TARGETS)
def test_gemm_relu_950_dialect(ascend_example, target):
    assert ascend_example("gemm_relu_950").main(M=128, N=64, K=96, target=target) < 1e-5
