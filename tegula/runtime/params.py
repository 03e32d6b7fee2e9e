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
    for a scalar), ``dtype`` and ``param`` (the IR's Buffer or Var).

    As in TileLang 0.1.15, ``dtype`` is the kernel's own dtype (a :class:`~tegula.ir.dtype.DType`,
    which is a ``str``: ``p.dtype == "float16"``), not a torch dtype; ``torch_dtype()`` gives the
    torch one. ``tegula_dtype`` is the same ``DType`` (kept for older callers)."""

    name: str
    shape: list
    dtype: Any
    tegula_dtype: dt.DType
    param: Union[Buffer, Var]

    @classmethod
    def of(cls, p: Union[Buffer, Var]) -> "KernelParam":
        shape = list(p.shape) if isinstance(p, Buffer) else []
        return cls(p.name, shape, p.dtype, p.dtype, p)

    # TileLang's constructors
    @classmethod
    def from_buffer(cls, buffer: Buffer) -> "KernelParam":
        """The parameter of a tensor (``Buffer``)."""
        return cls.of(buffer)

    @classmethod
    def from_var(cls, var: Var) -> "KernelParam":
        """The parameter of a scalar (``Var``)."""
        return cls.of(var)

    def is_scalar(self) -> bool:
        return not isinstance(self.param, Buffer)

    def is_unsigned(self) -> bool:
        return self.tegula_dtype.kind == "uint"

    def is_float8(self) -> bool:
        return self.tegula_dtype.name.startswith("float8")

    def is_float4(self) -> bool:
        return self.tegula_dtype.name.startswith("float4")

    def is_boolean(self) -> bool:
        return self.tegula_dtype.is_bool

    def torch_dtype(self) -> Any:
        """The torch dtype of the parameter (needs torch; ValueError for a dtype torch lacks)."""
        return self.tegula_dtype.as_torch()

    def tilelang_dtype(self) -> dt.DType:
        """The parameter's dtype as ``T.dtype`` (the same object as ``dtype``)."""
        return self.tegula_dtype

    def is_dynamic(self) -> bool:
        return any(not isinstance(d, int) for d in self.shape)

