"""CheckNpuOps: every copy follows a legal path of the machine and every constant flag id is in
range; errors name the operation's line. The IR does not change.

For example, on a2a3::

    T.copy(A[0, 0], a_l0a)    # GM -> L0A: no such path
    # ScopeError: T.copy from GM to L0A: the a2a3 has no such path; legal paths: GM -> L1, ...
"""
from __future__ import annotations

from typing import Any

from tegula.errors import KernelTypeError, ScopeError
from tegula.ir.expr import Const
from tegula.ir.npu import FLAG_IDS, NpuKernel, SetCrossFlag, SetFlag, WaitCrossFlag, WaitFlag
from tegula.ir.stmt import Copy, PrimFunc
from tegula.ir.visitor import post_order_visit

_NPU = ("l1", "l0a", "l0b", "l0c", "ub")


def _hw(scope: str, m: Any) -> str:
    return "GM" if scope == "global" else m.buffers[scope].name if scope in m.buffers else scope


def check_copy(s: Copy, m: Any) -> None:
    """Raise a ScopeError at the copy's line when ``m`` has no path from its source to its
    destination memory."""
    src, dst = s.src.buffer.scope, s.dst.buffer.scope
    if src not in _NPU and dst not in _NPU:
        if src == "global" and dst == "global":
            raise ScopeError("T.copy from GM to GM is not an NPU copy path", s.span,
                             hint="stage the tile through UB (T.alloc_ub)")
        return
    if m.path(src, dst) is None:
        raise ScopeError(f"T.copy from {_hw(src, m)} to {_hw(dst, m)}: the {m.name} has no such path; "
                         f"legal paths: {', '.join(m.legal_paths())}", s.span)


def check_flag_ids(n: Any, m: Any) -> None:
    """Constant flag ids of ``n`` (a flag node) must be in range for ``m``."""
    if isinstance(n, (SetFlag, WaitFlag)):
        e, limit, what = n.id, FLAG_IDS, "T.set_flag" if isinstance(n, SetFlag) else "T.wait_flag"
    elif isinstance(n, (SetCrossFlag, WaitCrossFlag)):
        e, limit = n.flag, m.cross_flag_ids
        what = "T.set_cross_flag" if isinstance(n, SetCrossFlag) else "T.wait_cross_flag"
    else:
        return
    if isinstance(e, Const) and not 0 <= int(e.value) < limit:
        raise KernelTypeError(f"{what}: flag id {e.value} is out of range 0..{limit - 1}", n.span,
                              hint=f"the {m.name} has {limit} ids")


def check_kernel(k: NpuKernel, m: Any) -> None:
    """All checks of this pass on one kernel."""
    def visit(n: Any) -> None:
        if isinstance(n, Copy):
            check_copy(n, m)
        check_flag_ids(n, m)
    post_order_visit(k.body, visit)


def check_npu_ops(func: PrimFunc, m: Any) -> PrimFunc:
    """CheckNpuOps over every NPU kernel of ``func`` (returns ``func`` unchanged)."""
    post_order_visit(func.body, lambda n: check_kernel(n, m) if isinstance(n, NpuKernel) else None)
    return func
