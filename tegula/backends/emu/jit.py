"""The ``cuda-emu`` target: lower with the CUDA pipeline, then run the thread-level IR on the CPU.

``tegula.compile(f, target="cuda-emu")`` (or ``"cuda-emu:sm_90a"``; the arch defaults to sm_80)
needs neither a GPU nor a CUDA compiler. The artifact's ``source`` is the lowered IR as T-script,
each statement under the kernel line it came from.
"""
from __future__ import annotations

from typing import Any, Optional, Sequence

from tegula.ir.stmt import PrimFunc
from tegula.passconfig import PassConfigKey
from tegula.runtime.args import to_numpy
from tegula.target import Target
from tegula.transform.pipeline import Pipeline, check_pipeline


class EmuArtifact:
    """A lowered kernel and how to run it under the emulator."""

    def __init__(self, func: PrimFunc, lowered: PrimFunc, as_warnings: bool):
        self.func = func
        self.lowered = lowered
        self.as_warnings = as_warnings
        self.source = lowered.script()

    def run(self, args: Sequence[Any]) -> None:
        from tegula.backends.emu import execute

        execute(self.lowered, [to_numpy(a) if hasattr(a, "shape") else a for a in args],
                as_warnings=self.as_warnings)


def build(func: PrimFunc, target: Target, pass_configs: dict,
          pipeline: Optional[Pipeline] = None) -> EmuArtifact:
    """The ``cuda-emu`` target's builder: ``pipeline`` (default: the CUDA pipeline of the
    target's arch), then the emulator. A target with ``interpret`` set is the interpreter's
    (thread-level kernels on cpu): its pipeline's CheckResources keeps Hopper-only calls' plain
    meaning on any arch."""
    p = check_pipeline(pipeline, target, pass_configs)
    lowered = p.run(func)
    return EmuArtifact(func, lowered, bool(pass_configs.get(PassConfigKey.TEGULA_EMU_RACES_AS_WARNINGS)))
