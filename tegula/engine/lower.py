"""``tilelang.engine.lower``: build a ``@T.prim_func`` and hand back what TileLang calls a compiled
artifact: the kernel's source (``kernel_source``), its parameters (``params``) and, as
``rt_mod``, the built :class:`~tegula.jit.JITKernel` (callable on the target it was built for).
tegula has no TVM modules: ``host_mod`` and ``device_mod`` are None.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from tegula.errors import ArgumentError


@dataclass
class CompiledArtifact:
    """What :func:`lower` returns (TileLang's field names)."""

    host_mod: Any
    device_mod: Any
    params: list
    kernel_source: str
    rt_mod: Optional[Any] = None


def lower(func_or_mod: Any, target: Any = "auto", target_host: Any = None, platform: str = "auto",
          runtime_only: bool = False, enable_host_codegen: bool = False,
          enable_device_compile: bool = False) -> CompiledArtifact:
    """Build ``func_or_mod`` (a ``@T.prim_func``) for ``target`` (``"auto"``: the default target)
    and return its :class:`CompiledArtifact`. ``platform`` and the codegen switches are TileLang's
    and change nothing here. Raises ArgumentError for anything but a prim_func."""
    from tegula.ir.stmt import PrimFunc
    from tegula.jit import compile as _compile

    if not isinstance(func_or_mod, PrimFunc):
        raise ArgumentError(f"tilelang.engine.lower: expected a @T.prim_func, got {type(func_or_mod).__name__}",
                            hint="pass the function a @T.prim_func decorator made")
    kernel = _compile(func_or_mod, target=target, target_host=target_host)
    params = None if runtime_only else kernel.params
    return CompiledArtifact(None, None, params, kernel.get_kernel_source(), kernel)
