"""tegula's settings: every environment variable tegula reads is read here, and nowhere else.

``config.settings`` holds the current values; ``config.override(**kw)`` replaces some of them for
the duration of a ``with`` block (tests use it instead of touching ``os.environ``)::

    from tegula import config
    with config.override(cuda_backend="nvcc", cache_dir="/tmp/c"):
        ...

Environment variables:

=====================  ===========================================================================
TEGULA_CUDA_HOME       CUDA toolkit root (else CUDA_HOME, CUDA_PATH, then the location of nvcc)
TEGULA_NVCC            nvcc executable (else ``<cuda_home>/bin/nvcc``, then ``nvcc`` on PATH)
TEGULA_CUDA_BACKEND    ``nvrtc`` or ``nvcc``: force a compiler (default: NVRTC when importable)
TEGULA_CACHE_DIR       disk cache for compiled kernels (default ``~/.cache/tegula``)
TEGULA_DISABLE_CACHE   ``1`` to neither read nor write the disk cache
TEGULA_TARGET          the target ``target="auto"`` (the default of ``tegula.jit`` / ``compile``) means:
                       ``cpu``, ``cuda``, ``cuda:sm_XX`` or ``cuda-emu`` (default ``auto``: CUDA
                       when a GPU is usable, else ``cpu``)
TEGULA_VERIFY          ``1`` to verify the IR after every pass (a VerifyError names the pass that
                       broke it)
TEGULA_TRACE           a directory: dump the IR after every pass of every kernel lowered
TEGULA_DEBUG           ``1`` to keep tegula's own frames in the tracebacks of kernel errors, and to
                       verify the IR after every pass
TEGULA_POISON_OUTPUTS  ``1`` to fill outputs the runtime allocates with NaN (ints: a marker) before a
                       kernel runs, so elements it never writes show (tests turn it on)
TEGULA_BLAS_THREADS    threads numpy's BLAS may use while the interpreter or the emulator runs a kernel
                       (default ``1``: their products are tile-sized; ``0`` leaves BLAS as it is)
TEGULA_INTERP_BATCH    how many blocks of a launch the interpreter may run side by side (default ``64``;
                       ``1`` runs every launch one block after another): see
                       :mod:`tegula.backends.interp.batch` for when it does
TEGULA_CONFORMANCE     the TileLang conformance corpus the tests run a CPU subset of (default: the
                       first ``.conformance`` or ``shared/conformance`` in the project's root or a
                       folder above it: :func:`conformance_root`)
TEGULA_STRICT_PERF     ``1`` to make performance warnings (:class:`tegula.errors.PerformanceWarning`)
                       errors: a fragment replicated over every thread past the limit below is
                       then a LayoutError
TEGULA_REPLICATED_LIMIT  elements per thread a fragment whose every thread holds all of it may have
                       before layout inference warns (default ``64``)
PTO_ISA_ROOT           a checkout of the public PTO ISA repository: the tests then compile the
                       emitted PTO C++ against its CPU simulator and compare with the interpreter
TEGULA_PTO_CXX         the C++20 compiler for that check (default: clang++ on PATH)
=====================  ===========================================================================
"""
from __future__ import annotations

import contextlib
import dataclasses
import os
from pathlib import Path
from typing import Iterator, Mapping, Optional, Union

from tegula.errors import ConfigError

_BACKENDS = ("nvrtc", "nvcc")


@dataclasses.dataclass(frozen=True)
class Settings:
    """A snapshot of tegula's settings. Build one with :func:`from_env`; never mutate it."""

    cuda_home: Optional[str] = None
    nvcc: Optional[str] = None
    cuda_backend: Optional[str] = None  # "nvrtc", "nvcc", or None for automatic
    cache_dir: str = os.path.join(os.path.expanduser("~"), ".cache", "tegula")
    disable_cache: bool = False
    default_target: str = "auto"
    verify_ir: bool = False
    trace_dir: Optional[str] = None
    debug_tracebacks: bool = False
    poison_outputs: bool = False
    conformance_dir: Optional[str] = None
    blas_threads: int = 1
    interp_batch: int = 64
    pto_isa_root: Optional[str] = None
    pto_cxx: Optional[str] = None
    strict_performance: bool = False
    replicated_fragment_limit: int = 64

    def __post_init__(self) -> None:
        if self.cuda_backend is not None and self.cuda_backend not in _BACKENDS:
            raise ConfigError(
                f"cuda_backend must be one of {', '.join(_BACKENDS)}, got {self.cuda_backend!r}",
                hint="set TEGULA_CUDA_BACKEND=nvrtc or TEGULA_CUDA_BACKEND=nvcc, or unset it")


def _flag(value: Optional[str]) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def from_env(environ: Optional[Mapping[str, str]] = None) -> Settings:
    """Read the settings from ``environ`` (default: ``os.environ``)."""
    env = os.environ if environ is None else environ
    kw = {}
    cuda_home = env.get("TEGULA_CUDA_HOME") or env.get("CUDA_HOME") or env.get("CUDA_PATH")
    if cuda_home:
        kw["cuda_home"] = cuda_home
    if env.get("TEGULA_NVCC"):
        kw["nvcc"] = env["TEGULA_NVCC"]
    if env.get("TEGULA_CUDA_BACKEND"):
        kw["cuda_backend"] = env["TEGULA_CUDA_BACKEND"].strip().lower()
    if env.get("TEGULA_CACHE_DIR"):
        kw["cache_dir"] = os.path.expanduser(env["TEGULA_CACHE_DIR"])
    kw["disable_cache"] = _flag(env.get("TEGULA_DISABLE_CACHE"))
    if env.get("TEGULA_TARGET"):
        kw["default_target"] = env["TEGULA_TARGET"].strip()
    kw["verify_ir"] = _flag(env.get("TEGULA_VERIFY"))
    if env.get("TEGULA_TRACE"):
        kw["trace_dir"] = env["TEGULA_TRACE"]
    kw["debug_tracebacks"] = _flag(env.get("TEGULA_DEBUG"))
    kw["poison_outputs"] = _flag(env.get("TEGULA_POISON_OUTPUTS"))
    if env.get("TEGULA_CONFORMANCE"):
        kw["conformance_dir"] = os.path.expanduser(env["TEGULA_CONFORMANCE"])
    if env.get("TEGULA_BLAS_THREADS", "").strip():
        raw = env["TEGULA_BLAS_THREADS"].strip()
        if not raw.isdecimal():
            raise ConfigError(f"TEGULA_BLAS_THREADS must be a whole number, got {raw!r}",
                              hint="1 (the default) for tile-sized products, 0 to leave BLAS as it is")
        kw["blas_threads"] = int(raw)
    if env.get("TEGULA_INTERP_BATCH", "").strip():
        raw = env["TEGULA_INTERP_BATCH"].strip()
        if not raw.isdecimal() or int(raw) < 1:
            raise ConfigError(f"TEGULA_INTERP_BATCH must be a whole number of at least 1, got {raw!r}",
                              hint="64 (the default) runs up to 64 blocks side by side, 1 one block at a time")
        kw["interp_batch"] = int(raw)
    kw["strict_performance"] = _flag(env.get("TEGULA_STRICT_PERF"))
    if env.get("TEGULA_REPLICATED_LIMIT", "").strip():
        raw = env["TEGULA_REPLICATED_LIMIT"].strip()
        if not raw.isdecimal():
            raise ConfigError(f"TEGULA_REPLICATED_LIMIT must be a whole number, got {raw!r}",
                              hint="64 (the default): elements per thread before the warning")
        kw["replicated_fragment_limit"] = int(raw)
    if env.get("PTO_ISA_ROOT"):
        kw["pto_isa_root"] = os.path.expanduser(env["PTO_ISA_ROOT"])
    if env.get("TEGULA_PTO_CXX"):
        kw["pto_cxx"] = env["TEGULA_PTO_CXX"]
    return Settings(**kw)


settings: Settings = from_env()


@contextlib.contextmanager
def override(**kw: object) -> Iterator[Settings]:
    """Replace some settings within a ``with`` block; raises ConfigError for an unknown name."""
    global settings
    names = {f.name for f in dataclasses.fields(Settings)}
    unknown = sorted(set(kw) - names)
    if unknown:
        raise ConfigError(f"unknown setting(s): {', '.join(unknown)}",
                          hint=f"known settings: {', '.join(sorted(names))}")
    previous = settings
    settings = dataclasses.replace(previous, **kw)
    try:
        yield settings
    finally:
        settings = previous


def get() -> Settings:
    """The settings in force, overrides included."""
    return settings


def conformance_candidates(root: Union[str, "os.PathLike[str]"]) -> list[Path]:
    """Where the conformance corpus is looked for, in order: ``TEGULA_CONFORMANCE`` when set,
    else ``.conformance`` and ``shared/conformance`` in ``root`` and in each folder above it."""
    given = get().conformance_dir
    if given:
        return [Path(given)]
    start = Path(root).resolve()
    return [d / name for d in (start, *start.parents) for name in (".conformance", "shared/conformance")]


def conformance_root(root: Union[str, "os.PathLike[str]"]) -> Optional[Path]:
    """The TileLang conformance corpus (the folder holding ``run.sh`` and ``tilelang/examples``)
    for the project whose root is ``root``: the first of :func:`conformance_candidates` that holds
    ``tilelang/examples``, or None."""
    for c in conformance_candidates(root):
        if (c / "tilelang" / "examples").is_dir():
            return c
    return None
