"""``kernel.params``: a kernel's parameters as TileLang programs see them (``KernelParam``)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union

from tegula.ir import dtype as dt
from tegula.ir.buffer import Buffer
from tegula.ir.expr import Var


@dataclass(frozen=True)
class KernelParam:
    """One parameter: ``name``, ``shape`` (ints, and the ``Var`` of each dynamic dimension; ``[]``
    for a scalar), ``dtype`` (a torch dtype when torch is installed, else tegula's dtype) and
    ``tegula_dtype``; ``param`` is the IR's Buffer or Var."""

    name: str
    shape: list
    dtype: Any
    tegula_dtype: dt.DType
    param: Union[Buffer, Var]

    @classmethod
    def of(cls, p: Union[Buffer, Var]) -> "KernelParam":
        shape = list(p.shape) if isinstance(p, Buffer) else []
        return cls(p.name, shape, torch_dtype_or_own(p.dtype), p.dtype, p)

    def is_scalar(self) -> bool:
        return not isinstance(self.param, Buffer)

    def is_float8(self) -> bool:
        return self.tegula_dtype.name.startswith("float8")

    def is_boolean(self) -> bool:
        return self.tegula_dtype.is_bool

    def is_dynamic(self) -> bool:
        return any(not isinstance(d, int) for d in self.shape)


def torch_dtype_or_own(d: dt.DType) -> Any:
    """The torch dtype of ``d`` when torch is installed and has one; else ``d`` itself."""
    try:
        from tegula.runtime.args import _torch_dtype

        return _torch_dtype(d)
    except Exception:  # no torch, or a dtype torch lacks
        return d
