"""The CPU target: a kernel 'built' for the interpreter is its IR, run with numpy."""
from __future__ import annotations

from typing import Any, Optional, Sequence

from tegula.ir.stmt import PrimFunc
from tegula.runtime.args import to_numpy
from tegula.target import Target
from tegula.transform.pipeline import Pipeline, check_pipeline


class InterpArtifact:
    def __init__(self, func: PrimFunc):
        self.func = func
        self.source = func.script()

    def run(self, args: Sequence[Any]) -> None:
        from tegula.backends.interp import execute

        execute(self.func, [to_numpy(a) if hasattr(a, "shape") else a for a in args])


def build(func: PrimFunc, target: Target, pass_configs: dict,
          pipeline: Optional[Pipeline] = None) -> InterpArtifact:
    """The ``cpu`` target's builder: the passes of ``pipeline`` (the interpreter's own is empty;
    user passes run on the tile-level IR), then the interpreter."""
    return InterpArtifact(check_pipeline(pipeline, target, pass_configs).run(func))
