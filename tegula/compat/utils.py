"""``tilelang.utils`` / ``tilelang.utils.tensor``: input supplies and a tolerant comparison.

- ``get_tensor_supply(supply_type)``: a function from a :class:`KernelParam` to a fresh random
  tensor of its shape and dtype (on the GPU when one is present), as the profiler makes them;
- ``torch_assert_close(a, b, rtol, atol, max_mismatched_ratio)``: like ``torch.testing.assert_close``
  but a fraction ``max_mismatched_ratio`` of the elements may differ.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from tegula.errors import ArgumentError
from tegula.runtime.params import KernelParam
from tegula.runtime.profiler import TensorSupplyType, random_tensor

__all__ = ["TensorSupplyType", "get_tensor_supply", "torch_assert_close", "KernelParam"]


def get_tensor_supply(supply_type: TensorSupplyType = TensorSupplyType.Integer) -> Callable[[Any], Any]:
    """A function ``param -> tensor`` filling a parameter's shape with ``supply_type`` values."""
    if not isinstance(supply_type, TensorSupplyType):
        raise ArgumentError(f"get_tensor_supply takes a TensorSupplyType, got {supply_type!r}")
    from tegula.compat import device

    rng = np.random.default_rng()
    where = "cuda" if device.cuda_available() else "cpu"

    def supply(param: Any) -> Any:
        p = param if isinstance(param, KernelParam) else KernelParam.of(param)
        if p.is_scalar():
            raise ArgumentError(f"get_tensor_supply: parameter '{p.name}' is a scalar, not a tensor")
        if p.is_dynamic():
            raise ArgumentError(f"get_tensor_supply: parameter '{p.name}' has dynamic dimensions "
                                f"{p.shape}", hint="make the inputs yourself for dynamic shapes")
        return random_tensor(p.param, tuple(p.shape), rng, True, where, supply_type)

    return supply


def _as_torch(x: Any) -> Any:
    import torch

    return x if isinstance(x, torch.Tensor) else torch.as_tensor(np.asarray(x))


def torch_assert_close(tensor_a: Any, tensor_b: Any, rtol: float = 1e-2, atol: float = 1e-3,
                       max_mismatched_ratio: float = 0.001, verbose: bool = False,
                       equal_nan: bool = True, check_device: bool = True, check_dtype: bool = True,
                       check_layout: bool = True, check_stride: bool = False,
                       base_name: str = "LHS", ref_name: str = "RHS") -> None:
    """Raise AssertionError unless ``|a - b| <= atol + rtol * |b|`` holds for all but a fraction
    ``max_mismatched_ratio`` of the elements (shapes must agree; with ``check_dtype`` and
    ``check_device`` dtypes and devices too). ``check_layout`` / ``check_stride`` are accepted."""
    a, b = _as_torch(tensor_a), _as_torch(tensor_b)
    if tuple(a.shape) != tuple(b.shape):
        raise AssertionError(f"shape mismatch: {base_name} {tuple(a.shape)} vs {ref_name} {tuple(b.shape)}")
    if check_dtype and a.dtype != b.dtype:
        raise AssertionError(f"dtype mismatch: {base_name} {a.dtype} vs {ref_name} {b.dtype}")
    if check_device and a.device != b.device:
        raise AssertionError(f"device mismatch: {base_name} {a.device} vs {ref_name} {b.device}")
    x = a.detach().cpu().double()
    y = b.detach().cpu().double()
    diff = (x - y).abs()
    bad = diff > atol + rtol * y.abs()
    nan_x, nan_y = x.isnan(), y.isnan()
    if equal_nan:
        bad = (bad & ~(nan_x & nan_y)) | (nan_x ^ nan_y)
    else:
        bad = bad | nan_x | nan_y
    n_bad, total = int(bad.sum()), max(1, bad.numel())
    if verbose:
        print(f"torch_assert_close: {n_bad} of {total} elements differ "
              f"(allowed {max_mismatched_ratio:.4%}), max |diff| {float(diff.nan_to_num().max()) if total else 0:.6g}")
    if n_bad / total > max_mismatched_ratio:
        flat = bad.flatten().nonzero()
        first = int(flat[0]) if len(flat) else 0
        idx = tuple(int(i) for i in np.unravel_index(first, tuple(x.shape))) if x.dim() else ()
        raise AssertionError(
            f"{n_bad} of {total} elements ({n_bad / total:.4%}) differ beyond rtol={rtol}, atol={atol} "
            f"(allowed: {max_mismatched_ratio:.4%}); first at {idx}: {base_name} {float(x[idx])} vs "
            f"{ref_name} {float(y[idx])}")
