"""AutoSchedule for the NPU target: tasks and dependencies (:mod:`.tasks`), the modulo and
straight-line solvers (:mod:`.solve`, z3 or a list scheduler); the pass itself is
``tegula/backends/npu/passes/auto_schedule.py``. ``schedules(artifact_or_func)`` returns the
schedules a compiled kernel got."""
from __future__ import annotations

from typing import Any

from tegula.backends.npu.sched.solvers import Schedule, have_z3, solve  # noqa: F401

SCHEDULES = "schedules"  # kernel annotation: list of LoopSchedule


def schedules(obj: Any) -> list:
    """The AutoSchedule results of a compiled NPU kernel (an artifact, a kernel or a lowered
    PrimFunc): one :class:`~tegula.backends.npu.passes.auto_schedule.LoopSchedule` per loop and
    per straight-line region scheduled."""
    from tegula.ir.npu import NpuKernel
    from tegula.ir.visitor import post_order_visit

    func = getattr(obj, "artifact", obj)
    func = getattr(func, "lowered", func)
    out: list = []
    post_order_visit(func.body, lambda n: out.extend(n.annotations.get(SCHEDULES, []))
                     if isinstance(n, NpuKernel) else None)
    return out
