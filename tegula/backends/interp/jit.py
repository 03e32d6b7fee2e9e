"""The CPU target: a kernel 'built' for the interpreter is its IR, run with numpy."""
from __future__ import annotations

from typing import Any, Optional, Sequence

from tegula.ir.stmt import Kernel, PrimFunc, SeqStmt
from tegula.runtime.args import to_numpy
from tegula.target import KINDS, Target
from tegula.transform.pipeline import Pipeline, check_pipeline
from tegula.transform.thread_variance import warn_uniform_adds


class InterpArtifact:
    def __init__(self, func: PrimFunc):
        self.func = func
        self.source = func.script()

    def run(self, args: Sequence[Any]) -> None:
        from tegula.backends.interp import execute

        execute(self.func, [to_numpy(a) if hasattr(a, "shape") else a for a in args])


def thread_level(func: PrimFunc) -> bool:
    """Whether a kernel of ``func`` binds thread indices (``T.get_thread_binding``)."""
    return any(isinstance(s, Kernel) and s.thread_var is not None
               for s in (func.body.stmts if isinstance(func.body, SeqStmt) else (func.body,)))


def build(func: PrimFunc, target: Target, pass_configs: dict,
          pipeline: Optional[Pipeline] = None) -> Any:
    """The ``cpu`` target's builder: the passes of ``pipeline`` (the interpreter's own is empty;
    user passes run on the tile-level IR), then the interpreter. Thread-level kernels (which bind
    thread indices) run as the emulator runs them, one lane per thread: their meaning is per
    thread."""
    func = check_pipeline(pipeline, target, pass_configs).run(func)
    if thread_level(func):   # the cuda-emu target's builder, through the target table
        emu = Target("cuda-emu", "sm_80", interpret=True)
        return KINDS[emu.kind].load_builder()(func, emu, pass_configs)
    warn_uniform_adds(func)
    return InterpArtifact(func)
