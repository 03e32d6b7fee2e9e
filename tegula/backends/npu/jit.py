"""The NPU targets: ``ascend-emu:a2a3|a5`` (run on the emulator), ``ascend-pto:a2a3|a5``
(PTO C++ source only, ``get_kernel_source()``) and ``ascendc:a2a3`` (Ascend C source only). The arch names the machine model (a2a3 when
left out)."""
from __future__ import annotations

from typing import Any, Optional, Sequence

from tegula.errors import UnsupportedError
from tegula.ir.stmt import PrimFunc
from tegula.passconfig import PassConfigKey
from tegula.runtime.args import to_numpy
from tegula.target import Target
from tegula.transform.pipeline import Pipeline, check_pipeline


class NpuEmuArtifact:
    """A lowered NPU kernel and how to run it on the emulator."""

    def __init__(self, lowered: PrimFunc, machine: Any, seed: int, as_warnings: bool,
                 strict: bool = False):
        self.lowered = lowered
        self.strict = strict
        self.machine = machine
        self.seed = seed
        self.as_warnings = as_warnings
        self.source = lowered.script()

    def run(self, args: Sequence[Any]) -> None:
        from tegula.backends.npu.emu import execute

        execute(self.lowered, [to_numpy(a) if hasattr(a, "shape") else a for a in args],
                self.machine, self.seed, self.as_warnings, self.strict)


class NpuSourceArtifact:
    """Generated device source that this machine cannot build or run."""

    def __init__(self, source: str, target: Target):
        self.source = source
        self.target = target

    def run(self, args: Sequence[Any]) -> None:
        raise UnsupportedError(f"target {self.target} builds source only (get_kernel_source()); "
                               "run the kernel with target='ascend-emu' or 'cpu'")


def build_emu(func: PrimFunc, target: Target, pass_configs: dict,
              pipeline: Optional[Pipeline] = None) -> NpuEmuArtifact:
    """The ``ascend-emu`` target's builder: ``pipeline`` (default: the NPU pipeline of the
    target's machine), then the emulator."""
    from tegula.backends.npu.machine import machine

    lowered = check_pipeline(pipeline, target, pass_configs).run(func)
    return NpuEmuArtifact(lowered, machine(target.arch), int(pass_configs.get(PassConfigKey.TEGULA_NPU_EMU_SEED, 0)),
                          bool(pass_configs.get(PassConfigKey.TEGULA_EMU_RACES_AS_WARNINGS)),
                          bool(pass_configs.get(PassConfigKey.TEGULA_NPU_EMU_STRICT)))


def build_pto(func: PrimFunc, target: Target, pass_configs: dict,
              pipeline: Optional[Pipeline] = None) -> NpuSourceArtifact:
    """The ``ascend-pto`` target's builder: ``pipeline`` (default: the NPU pipeline of the
    target's machine), then the PTO C++ emitter."""
    from tegula.backends.npu.pto import emit

    return NpuSourceArtifact(emit(check_pipeline(pipeline, target, pass_configs).run(func), target), target)


def build_ascendc(func: PrimFunc, target: Target, pass_configs: dict,
                  pipeline: Optional[Pipeline] = None) -> NpuSourceArtifact:
    """The ``ascendc`` target's builder: ``pipeline`` (default: the NPU pipeline of the target's
    machine), then the Ascend C emitter."""
    from tegula.backends.npu.ascendc import emit

    return NpuSourceArtifact(emit(check_pipeline(pipeline, target, pass_configs).run(func), target), target)
