"""Targets, and the one table of the target kinds tegula knows.

A target string is ``"cpu"`` (the interpreter), ``"cuda"`` / ``"cuda:sm_80"`` / ``"cuda:sm_90a"``
(the CUDA backend), ``"cuda-emu"`` (the thread-level emulator), ``"ascend-emu:a2a3"`` /
``"ascend-emu:a5"`` (the NPU emulator), ``"ascend-pto:a2a3"`` / ``"ascend-pto:a5"`` (PTO source),
``"ascendc:a2a3"`` (Ascend C source) or ``"auto"`` (``TEGULA_TARGET`` when set, else CUDA when a GPU and the CUDA backend are present,
else CPU).

Each kind is a :class:`TargetKind` row of :data:`KINDS`: what builds it, whether its kernels run
on the host, and which pipeline table lowers it. Backends are named here as ``"module:attribute"``
strings and imported only when a kernel is built for them, so this module imports no backend. A
new target (the NPU) adds one row.
"""
from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass
from typing import Any, Callable, Optional, Protocol, Sequence

from tegula import config
from tegula.errors import ConfigError, UnsupportedError


@dataclass(frozen=True)
class Target:
    kind: str                  # a key of KINDS: "cpu", "cuda", "cuda-emu"
    arch: Optional[str] = None  # "sm_80", "sm_90a", ...
    # the interpreter runs this build (a thread-level kernel on target cpu, through the
    # emulator): Hopper-only calls keep their plain meaning on any arch and shared memory has no
    # limit (CheckResources' ``interpret`` option comes from here)
    interpret: bool = False

    def __str__(self) -> str:
        return f"{self.kind}:{self.arch}" if self.arch else self.kind


class Artifact(Protocol):
    """What a backend builds: runnable, with the source a user can read."""

    source: str

    def run(self, args: Sequence[Any]) -> None: ...


# builder(func, target, pass_configs, pipeline) -> Artifact
Builder = Callable[..., Artifact]


def load_ref(ref: str) -> Any:
    """What a ``"module:attribute"`` string names (the module imported now)."""
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)


@dataclass(frozen=True)
class TargetKind:
    """The facts of one kind of target.

    ``builder``: ``"module:function"`` building an :class:`Artifact` from
    ``(func, target, pass_configs, pipeline)``. ``runs_on_host``: its kernels run on the CPU (their
    arguments and outputs stay host arrays). ``pipeline``: ``"module:TABLE"``, the pipeline table
    (rows of :class:`tegula.transform.PassSpec`) that lowers it, or None when it runs tile-level
    IR as is. ``lowers_as``: the kind whose pipeline and arch it uses (``cuda-emu`` runs what
    ``cuda`` produces). ``default_arch`` / ``detect_arch``: the arch when the target string names
    none (``detect_arch`` is ``"module:function"`` taking a Target, raising ConfigError).
    ``archs``: the only archs it takes, the first being the one a target string without one gets.
    ``rules``: modules imported with the builder, where other backends register rules its kernels
    need (the interpreter runs NPU dialect nodes by ``tegula.backends.npu.interp_rules``), so the
    backend itself imports no other backend.
    """

    name: str
    builder: str
    runs_on_host: bool
    pipeline: Optional[str] = None
    lowers_as: Optional[str] = None
    default_arch: Optional[str] = None
    detect_arch: Optional[str] = None
    aliases: tuple[str, ...] = ()
    archs: tuple[str, ...] = ()
    summary: str = ""
    rules: tuple[str, ...] = ()

    @property
    def uses_cuda_pipeline(self) -> bool:
        return self.pipeline is not None and self.pipeline == KINDS["cuda"].pipeline

    def lowering_target(self, target: Target) -> Target:
        """The target whose pipeline ``target`` is lowered with, arch resolved
        (``cuda-emu`` -> ``cuda:sm_80``; ``cuda`` -> ``cuda:<the GPU's arch>``)."""
        kind = self.lowers_as or self.name
        arch = target.arch or self.default_arch
        if arch is None and self.detect_arch is not None:
            arch = load_ref(self.detect_arch)(target)
        return Target(kind, arch, target.interpret)

    def load_builder(self) -> Builder:
        try:
            for module in self.rules:
                importlib.import_module(module)
            return load_ref(self.builder)
        except (ImportError, AttributeError) as e:
            raise UnsupportedError(f"the {self.name} backend is not available in this installation: {e}") from None


_CUDA_PIPELINE = "tegula.backends.cuda.pipeline:CUDA_PASSES"
_NPU_PIPELINE = "tegula.backends.npu.pipeline:NPU_PASSES"

KINDS: dict[str, TargetKind] = {k.name: k for k in (
    TargetKind("cpu", "tegula.backends.interp.jit:build", runs_on_host=True,
               aliases=("c", "llvm", "host"), rules=("tegula.backends.npu.interp_rules",),
               summary="the interpreter: tile-level IR run block by block with numpy"),
    TargetKind("cuda", "tegula.backends.cuda.jit:build", runs_on_host=False,
               pipeline=_CUDA_PIPELINE, detect_arch="tegula.backends.cuda.jit:resolve_arch",
               summary="CUDA C++ compiled by NVRTC or nvcc, launched on an NVIDIA GPU"),
    TargetKind("cuda-emu", "tegula.backends.emu.jit:build", runs_on_host=True,
               pipeline=_CUDA_PIPELINE, lowers_as="cuda", default_arch="sm_80",
               summary="the CUDA pipeline's thread-level IR run on the CPU, with race checks"),
    TargetKind("ascend-emu", "tegula.backends.npu.jit:build_emu", runs_on_host=True,
               pipeline=_NPU_PIPELINE, archs=("a2a3", "a5"),
               summary="the NPU pipeline's pipe-level IR run on the CPU: per-pipe queues, flags, races"),
    TargetKind("ascend-pto", "tegula.backends.npu.jit:build_pto", runs_on_host=True,
               pipeline=_NPU_PIPELINE, archs=("a2a3", "a5"),
               summary="PTO C++ source of the NPU pipeline's output (get_kernel_source())"),
    TargetKind("ascendc", "tegula.backends.npu.jit:build_ascendc", runs_on_host=True,
               pipeline=_NPU_PIPELINE, archs=("a2a3",),
               summary="Ascend C source of the NPU pipeline's output (get_kernel_source())"),
)}


def declare(kind: TargetKind) -> None:
    """Add (or replace) a kind of target."""
    KINDS[kind.name] = kind


def kind_of(target: Target) -> TargetKind:
    """The facts of ``target``'s kind."""
    return KINDS[target.kind]


@functools.lru_cache(maxsize=None)
def gpu_available() -> bool:
    """True when a CUDA GPU can be used from this process."""
    try:
        import torch

        if torch.cuda.is_available():
            return True
    except ImportError:
        pass
    try:
        from cuda.bindings import driver  # type: ignore[import-not-found]

        (err,) = driver.cuInit(0)
        if int(err) != 0:
            return False
        err, n = driver.cuDeviceGetCount()
        return int(err) == 0 and n > 0
    except Exception:
        return False


def _cuda_builds_here() -> bool:
    try:
        KINDS["cuda"].load_builder()
        return True
    except UnsupportedError:
        return False


def parse_target(target: Any) -> Target:
    """A ``Target`` from a string. ``"auto"`` (or None) is ``TEGULA_TARGET`` when that is set
    (``config.default_target``), else CUDA when a GPU is usable here and CPU otherwise.
    Raises ConfigError for an unknown target, naming TEGULA_TARGET when the bad value came from it."""
    if isinstance(target, Target):
        return target
    if target is None:
        target = "auto"
    if isinstance(target, str) and target.strip().lower() == "auto":
        default = config.get().default_target
        if default.strip().lower() != "auto":
            try:
                return parse_target(default)
            except ConfigError as e:
                raise ConfigError(f"TEGULA_TARGET={default!r} is not a target: {e.message}",
                                  hint="set TEGULA_TARGET to auto, cpu, cuda, cuda:sm_XX or cuda-emu, "
                                       "or unset it") from None
    if not isinstance(target, str):
        raise ConfigError(f"target must be a string like 'cpu' or 'cuda:sm_90a', got {target!r}")
    t = target.strip().lower()
    if t == "auto":
        return Target("cuda") if gpu_available() and _cuda_builds_here() else Target("cpu")
    kind, _, arch = t.partition(":")
    for k in KINDS.values():
        if kind in k.aliases:
            kind = k.name
    if kind not in KINDS:
        raise ConfigError(f"unknown target {target!r}; expected 'auto', "
                          + ", ".join(f"'{k}'" for k in KINDS) + " or 'cuda:sm_XX'")
    archs = KINDS[kind].archs
    if archs:
        if arch and arch not in archs:
            raise ConfigError(f"unknown machine in target {target!r}; expected "
                              + " or ".join(f"{kind}:{a}" for a in archs))
        return Target(kind, arch or archs[0])
    return Target(kind, arch or None)


def builder_for(target: Target) -> Builder:
    """The function that builds kernels for ``target`` (its backend imported now)."""
    return kind_of(target).load_builder()
