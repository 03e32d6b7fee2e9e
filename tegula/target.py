"""Targets and the backends that build kernels for them.

A target string is ``"cpu"`` (the interpreter), ``"cuda"`` / ``"cuda:sm_80"`` / ``"cuda:sm_90a"``
(the CUDA backend), ``"cuda-emu"`` (the thread-level emulator), ``"ascend-emu:a2a3"`` /
``"ascend-emu:a5"`` (the NPU emulator), ``"ascend-pto:a2a3"`` / ``"ascend-pto:a5"`` (PTO source) or ``"auto"`` (CUDA when a GPU and
the CUDA backend are present, else CPU). Backends register a builder with :func:`register`.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Optional, Protocol, Sequence

from tegula import config
from tegula.errors import ConfigError, UnsupportedError
from tegula.ir.stmt import PrimFunc


@dataclass(frozen=True)
class Target:
    kind: str                  # "cpu", "cuda", "cuda-emu"
    arch: Optional[str] = None  # "sm_80", "sm_90a", ...

    def __str__(self) -> str:
        return f"{self.kind}:{self.arch}" if self.arch else self.kind


class Artifact(Protocol):
    """What a backend builds: runnable, with the source a user can read."""

    source: str

    def run(self, args: Sequence[Any]) -> None: ...


Builder = Callable[[PrimFunc, Target, dict], Artifact]
_BUILDERS: dict[str, Builder] = {}


def register(kind: str) -> Callable[[Builder], Builder]:
    def deco(fn: Builder) -> Builder:
        _BUILDERS[kind] = fn
        return fn

    return deco


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


def _load_backends() -> None:
    import tegula.backends.interp.jit  # noqa: F401  (registers "cpu")
    import tegula.backends.emu.jit  # noqa: F401  (registers "cuda-emu")
    import tegula.backends.npu.jit  # noqa: F401  (registers "ascend-emu", "ascend-pto")
    try:
        import tegula.backends.cuda.jit  # noqa: F401  (registers "cuda")
    except ImportError:
        pass


def parse_target(target: Any) -> Target:
    """A ``Target`` from a string. ``"auto"`` (or None) is ``TEGULA_TARGET`` when that is set
    (``config.default_target``), else CUDA when a GPU is usable here and CPU otherwise.
    Raises ConfigError for an unknown target, naming TEGULA_TARGET when the bad value came from it."""
    if isinstance(target, Target):
        return target
    if target is None or (isinstance(target, str) and target.strip().lower() == "auto"):
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
    _load_backends()
    t = target.strip().lower()
    if t == "auto":
        return Target("cuda") if "cuda" in _BUILDERS and gpu_available() else Target("cpu")
    kind, _, arch = t.partition(":")
    if kind in ("c", "llvm", "host"):
        kind = "cpu"
    if kind in ("ascend-emu", "ascend-pto"):
        if arch and arch not in ("a2a3", "a5"):
            raise ConfigError(f"unknown Ascend machine in target {target!r}; expected {kind}:a2a3 or {kind}:a5")
        return Target(kind, arch or "a2a3")
    if kind not in ("cpu", "cuda", "cuda-emu"):
        raise ConfigError(f"unknown target {target!r}; expected 'auto', 'cpu', 'cuda', 'cuda:sm_XX', "
                          "'cuda-emu', 'ascend-emu:a2a3|a5' or 'ascend-pto:a2a3|a5'")
    return Target(kind, arch or None)


def builder_for(target: Target) -> Builder:
    _load_backends()
    if target.kind not in _BUILDERS:
        raise UnsupportedError(f"the {target.kind} backend is not available in this installation")
    return _BUILDERS[target.kind]
