"""The call shortcut of JITKernel: the tensors of the last validated call, unchanged since,
run without validating again; any change torch makes to them (in place, of sizes or strides,
``.data =``) goes through validation, so a mistake is still an ArgumentError."""
import pytest

torch = pytest.importorskip("torch")

import tegula  # noqa: E402
from tegula.errors import ArgumentError  # noqa: E402

from kernels_util import vec_add  # noqa: E402


@pytest.fixture
def kernel(monkeypatch):
    k = tegula.compile(vec_add(64, "float32"), target="cpu")
    k.validated = []
    inner = type(k)._call

    def counting(self, args, kwargs):
        self.validated.append(1)
        return inner(self, args, kwargs)
    monkeypatch.setattr(type(k), "_call", counting)
    return k


def test_same_tensors_skip_validation_and_stay_right(kernel):
    a, b, c = torch.randn(64), torch.randn(64), torch.empty(64)
    for _ in range(3):
        kernel(a, b, c)
        torch.testing.assert_close(c, a + b)
    assert len(kernel.validated) == 1
    a.copy_(torch.randn(64))          # a new version: validated again, then short again
    kernel(a, b, c)
    kernel(a, b, c)
    torch.testing.assert_close(c, a + b)
    assert len(kernel.validated) == 2


@pytest.mark.parametrize("change", ["resize", "transpose", "data", "new tensor"])
def test_changed_tensors_are_validated_again(kernel, change):
    a, b, c = torch.randn(64), torch.randn(64), torch.empty(64)
    kernel(a, b, c)
    if change == "resize":
        a.resize_(32)
    elif change == "transpose":
        a.resize_(64, 1).t_()
    elif change == "data":
        a.data = torch.randn(32)
    else:
        a = torch.randn(32)
    with pytest.raises(ArgumentError, match="argument 'A'"):
        kernel(a, b, c)


def test_inference_tensors_take_the_validated_path(kernel):
    with torch.inference_mode():
        a, b, c = torch.randn(64), torch.randn(64), torch.empty(64)
        kernel(a, b, c)
        kernel(a, b, c)
    torch.testing.assert_close(c, a + b)
    assert len(kernel.validated) == 2
