"""Compile generated CUDA C++ to a cubin: NVRTC (through ``cuda-bindings``) or ``nvcc``.

``compile_cuda(source, "sm_90a")`` returns a :class:`CompileResult`. NVRTC is used when
``cuda.bindings.nvrtc`` imports and its library loads; otherwise ``nvcc -cubin`` runs in a
temporary directory. ``TEGULA_CUDA_BACKEND`` (see :mod:`tegula.config`) forces one of them.

Both compilers get ``-std=c++17``, the include dir of tegula's device headers
(``include/tegula/*.h``) and the CUDA toolkit include dir (for ``cuda_fp16.h`` and friends).
A failed compile raises :class:`tegula.errors.CompileError` with the compiler log and the
generated source lines the log points at.
"""
from __future__ import annotations

import dataclasses
import functools
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

from tegula import config
from tegula.errors import CompileError, ConfigError

class CompileFlagsWarning(UserWarning):
    """A compile flag the CUDA compiler in use does not take was left out (named in the message)."""


INCLUDE_DIR = Path(__file__).resolve().parent / "include"

_ARCH_RE = re.compile(r"^sm_(\d+)([af]?)$")
# "kernel.cu(12): error: ..." from NVRTC and nvcc's front end.
_LOG_LINE_RE = re.compile(r"(?P<file>[^\s()]+)\((?P<line>\d+)\): (?P<kind>error|warning)")


@dataclasses.dataclass(frozen=True)
class CompileResult:
    """A compiled kernel: the cubin, its PTX when the compiler kept it, and the compiler log."""

    cubin: bytes
    ptx: Optional[str]
    log: str
    arch: str
    backend: str  # "nvrtc" or "nvcc"
    seconds: float
    cached: bool = False


# ------------------------------------------------------------------------------ toolkit discovery
def _has_cuda_headers(path: Optional[str]) -> bool:
    return bool(path) and os.path.isfile(os.path.join(path, "cuda_fp16.h"))


def _pip_include_dirs() -> List[str]:
    """Include dirs of the pip wheels nvidia-cuda-runtime / nvidia-cuda-nvrtc (cu12 and cu13)."""
    found = []
    for root in sys.path:
        for pattern in ("nvidia/cu*/include", "nvidia/cuda_runtime/include", "nvidia/cuda_nvrtc/include"):
            found.extend(sorted(glob.glob(os.path.join(root, pattern))))
    return found


def find_nvcc() -> Optional[str]:
    """The nvcc to run: TEGULA_NVCC, else <cuda home>/bin/nvcc, else nvcc on PATH; None if absent."""
    settings = config.settings
    if settings.nvcc:
        return settings.nvcc if os.path.isfile(settings.nvcc) else shutil.which(settings.nvcc)
    if settings.cuda_home:
        candidate = os.path.join(settings.cuda_home, "bin", "nvcc")
        if os.path.isfile(candidate):
            return candidate
    return shutil.which("nvcc")


def find_cuda_home() -> Optional[str]:
    """The CUDA toolkit root: TEGULA_CUDA_HOME / CUDA_HOME / CUDA_PATH, else derived from nvcc."""
    if config.settings.cuda_home:
        return config.settings.cuda_home
    nvcc = find_nvcc()
    candidates = []
    if nvcc:
        candidates += [os.path.dirname(os.path.dirname(p)) for p in (nvcc, os.path.realpath(nvcc))]
    candidates.append("/usr/local/cuda")
    for home in candidates:
        if _has_cuda_headers(os.path.join(home, "include")):
            return home
    return None


def find_cuda_include() -> Optional[str]:
    """The directory holding ``cuda_fp16.h``: the toolkit's, else a pip wheel's; None if absent."""
    home = find_cuda_home()
    if home and _has_cuda_headers(os.path.join(home, "include")):
        return os.path.join(home, "include")
    for path in _pip_include_dirs():
        if _has_cuda_headers(path):
            return path
    return None


@functools.lru_cache(maxsize=None)
def _nvrtc_module():
    try:
        from cuda.bindings import nvrtc

        err, _, _ = nvrtc.nvrtcVersion()  # loads libnvrtc: fails here when it is missing
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            return None
        return nvrtc
    except Exception:  # ImportError, or the shared library cannot be found / loaded
        return None


def nvrtc_available() -> bool:
    """True when cuda-bindings imports and libnvrtc loads."""
    return _nvrtc_module() is not None


def available_backends() -> Tuple[str, ...]:
    """The compilers usable here, preferred first: a subset of ("nvrtc", "nvcc")."""
    found = []
    if nvrtc_available():
        found.append("nvrtc")
    if find_nvcc():
        found.append("nvcc")
    return tuple(found)


def detect_arch() -> Optional[str]:
    """The arch of GPU 0 through the driver API, e.g. "sm_80" or "sm_90a"; None without a GPU.

    Hopper and newer get the arch-specific suffix "a" (wgmma, setmaxnreg need it); the cubin then
    runs on exactly that compute capability, which is the GPU it is compiled for.
    """
    try:
        from cuda.bindings import driver

        (err,) = driver.cuInit(0)
        if err != driver.CUresult.CUDA_SUCCESS:
            return None
        err, device = driver.cuDeviceGet(0)
        if err != driver.CUresult.CUDA_SUCCESS:
            return None
        attr = driver.CUdevice_attribute
        err, major = driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device)
        err2, minor = driver.cuDeviceGetAttribute(attr.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device)
        if err != driver.CUresult.CUDA_SUCCESS or err2 != driver.CUresult.CUDA_SUCCESS:
            return None
    except Exception:  # no cuda-bindings, no driver, no device
        return None
    return f"sm_{major}{minor}" + ("a" if major >= 9 else "")


# ------------------------------------------------------------------------------ compiling
def _check_arch(arch: str) -> None:
    if not isinstance(arch, str) or not _ARCH_RE.match(arch):
        raise ConfigError(f"CUDA arch must look like 'sm_80' or 'sm_90a', got {arch!r}")


def _choose_backend() -> str:
    forced = config.settings.cuda_backend
    if forced == "nvrtc":
        if not nvrtc_available():
            raise CompileError(
                "TEGULA_CUDA_BACKEND=nvrtc but NVRTC cannot be loaded",
                hint="pip install cuda-bindings nvidia-cuda-nvrtc, or use TEGULA_CUDA_BACKEND=nvcc")
        return "nvrtc"
    if forced == "nvcc":
        if find_nvcc() is None:
            raise CompileError("TEGULA_CUDA_BACKEND=nvcc but nvcc was not found",
                               hint="set TEGULA_NVCC or TEGULA_CUDA_HOME, or put nvcc on PATH")
        return "nvcc"
    backends = available_backends()
    if not backends:
        raise CompileError(
            "no CUDA compiler found: neither NVRTC (cuda-bindings) nor nvcc",
            hint="pip install 'tegula[cuda]' nvidia-cuda-nvrtc, or install the CUDA toolkit")
    return backends[0]


def _common_options(options: Sequence[str]) -> List[str]:
    opts = ["-std=c++17", f"-I{INCLUDE_DIR}"]
    cuda_include = find_cuda_include()
    if cuda_include:
        opts.append(f"-I{cuda_include}")
    opts.extend(options)
    return opts


def compile_cuda(source: str, arch: str, *, options: Sequence[str] = (), name: str = "kernel",
                 fast_math: bool = False, use_cache: bool = False) -> CompileResult:
    """Compile ``source`` to a cubin for ``arch`` ("sm_80", "sm_90a", ...).

    ``options`` are passed to the compiler unchanged; ``name`` names the translation unit in the
    log (``<name>.cu``); ``fast_math`` adds ``--use_fast_math``. With ``use_cache`` the disk cache
    (:mod:`tegula.backends.cuda.cache`) is consulted first and filled after a compile.
    Raises ConfigError for a malformed arch and CompileError when compilation fails.
    """
    _check_arch(arch)
    options = tuple(options)
    if fast_math:
        options = options + ("--use_fast_math",)
    if use_cache and not config.settings.disable_cache:
        from tegula.backends.cuda import cache

        key = cache.cache_key(source, arch, options)
        start = time.perf_counter()
        hit = cache.load(key)
        if hit is not None:
            _, cubin, meta = hit
            return CompileResult(cubin=cubin, ptx=None, log=meta.get("log", ""), arch=arch,
                                 backend=meta.get("backend", "?"),
                                 seconds=time.perf_counter() - start, cached=True)
        result = compile_cuda(source, arch, options=options, name=name)
        cache.store(key, source, result.cubin,
                    {"arch": arch, "backend": result.backend, "options": list(options),
                     "log": result.log, "seconds": result.seconds, "name": name})
        return result

    backend = _choose_backend()
    opts = _common_options(options)
    start = time.perf_counter()
    if backend == "nvrtc":
        cubin, ptx, log = _compile_nvrtc(source, arch, opts, name)
    else:
        cubin, ptx, log = _compile_nvcc(source, arch, opts, name)
    return CompileResult(cubin=cubin, ptx=ptx, log=log, arch=arch, backend=backend,
                         seconds=time.perf_counter() - start)


# nvcc options NVRTC does not take. NVRTC compiles device code only and always optimizes it, so
# what these say is about the host compiler, nvcc's driver or its front end: dropped, with a
# warning that names them. (Options both take, -lineinfo, --use_fast_math, -D, -I, -G,
# --maxrregcount, -Xptxas, --ftz..., pass through; an option NVRTC rejects that is not in these
# tables reaches NVRTC and its error names it.)
_NVRTC_DROPPED = ("-O0", "-O1", "-O2", "-O3", "-Ofast", "-g", "--debug", "--keep", "-keep",
                  "--resource-usage", "-res-usage", "--expt-relaxed-constexpr",
                  "-expt-relaxed-constexpr", "--expt-extended-lambda", "-expt-extended-lambda",
                  "--extended-lambda", "-extended-lambda", "-shared", "-cubin", "--cubin",
                  "-c", "--compile")
_NVRTC_DROPPED_PREFIXES = ("-W", "-O", "-Xcompiler", "--compiler-options", "-ccbin",
                           "--compiler-bindir", "-Xlinker", "--linker-options", "-t=", "--threads",
                           "-arch", "--gpu-architecture", "-gencode", "--generate-code",
                           "-code", "--gpu-code", "-o", "--output-file", "-fPIC", "-fno-", "-march")
# options whose value may come as the next word (``-Xptxas -v``); NVRTC wants ``name=value``
_TWO_WORD = ("-Xcompiler", "--compiler-options", "-ccbin", "--compiler-bindir", "-Xlinker",
             "--linker-options", "-Xptxas", "--ptxas-options", "--maxrregcount", "-maxrregcount",
             "-I", "-D", "-U", "-include", "-t", "--threads", "-o", "-arch", "-gencode", "-code",
             "-std", "--std")


def nvrtc_options(options: Sequence[str]) -> Tuple[List[str], List[str]]:
    """nvcc-style ``options`` as NVRTC takes them: ``(kept, dropped)``. Two-word options are
    joined (``-Xptxas -v`` -> ``-Xptxas=-v``, ``-I dir`` -> ``-Idir``); host-compiler and driver
    options (``-O3``, ``-Wno-deprecated-declarations``, ``-Xcompiler -fPIC``, ``-ccbin g++``,
    ``--expt-relaxed-constexpr``...) are dropped (NVRTC optimizes device code by default)."""
    kept: List[str] = []
    dropped: List[str] = []
    words = list(options)
    i = 0
    while i < len(words):
        o = words[i]
        if o in _TWO_WORD and i + 1 < len(words) and not words[i + 1].startswith("-") or \
                o in ("-Xcompiler", "-Xptxas", "--ptxas-options", "-Xlinker") and i + 1 < len(words):
            value = words[i + 1]
            i += 2
            o = f"{o}{value}" if o in ("-I", "-D", "-U") else f"{o}={value}"
        else:
            i += 1
        if o in _NVRTC_DROPPED or o.startswith(_NVRTC_DROPPED_PREFIXES) and not o.startswith("-Xptxas"):
            dropped.append(o)
        else:
            kept.append(o)
    return kept, dropped


def _nvrtc_check(nvrtc, result, what: str) -> None:
    err = result[0] if isinstance(result, tuple) else result
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        _, msg = nvrtc.nvrtcGetErrorString(err)
        raise CompileError(f"NVRTC {what} failed: {msg.decode(errors='replace')}")


def _compile_nvrtc(source: str, arch: str, opts: List[str], name: str) -> Tuple[bytes, Optional[str], str]:
    nvrtc = _nvrtc_module()
    opts, dropped = nvrtc_options(opts)
    if dropped:
        warnings.warn(f"NVRTC ignores the nvcc option(s) {' '.join(dropped)}: they concern the host "
                      "compiler or nvcc's driver (NVRTC optimizes device code by default); "
                      "TEGULA_CUDA_BACKEND=nvcc passes them to nvcc", CompileFlagsWarning, stacklevel=2)
    filename = f"{name}.cu"
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), filename.encode(), 0, [], [])
    _nvrtc_check(nvrtc, err, "nvrtcCreateProgram")
    try:
        all_opts = [f"-arch={arch}"] + opts
        (status,) = nvrtc.nvrtcCompileProgram(prog, len(all_opts), [o.encode() for o in all_opts])
        err, size = nvrtc.nvrtcGetProgramLogSize(prog)
        buf = b" " * size
        nvrtc.nvrtcGetProgramLog(prog, buf)
        log = buf.rstrip(b"\0 ").decode(errors="replace")
        if status != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            _, msg = nvrtc.nvrtcGetErrorString(status)
            raise _compile_error("nvrtc", arch, log or msg.decode(errors="replace"), source, filename,
                                 ["nvrtc"] + all_opts)
        err, size = nvrtc.nvrtcGetCUBINSize(prog)
        _nvrtc_check(nvrtc, err, "nvrtcGetCUBINSize")
        cubin = b" " * size
        _nvrtc_check(nvrtc, nvrtc.nvrtcGetCUBIN(prog, cubin), "nvrtcGetCUBIN")
        ptx = None
        err, size = nvrtc.nvrtcGetPTXSize(prog)
        if err == nvrtc.nvrtcResult.NVRTC_SUCCESS and size > 1:  # sm_XX targets keep no PTX
            ptx_buf = b" " * size
            nvrtc.nvrtcGetPTX(prog, ptx_buf)
            ptx = ptx_buf.rstrip(b"\0").decode(errors="replace")
        return cubin, ptx, log
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def _compile_nvcc(source: str, arch: str, opts: List[str], name: str) -> Tuple[bytes, Optional[str], str]:
    nvcc = find_nvcc()
    with tempfile.TemporaryDirectory(prefix="tegula-nvcc-") as tmp:
        src = os.path.join(tmp, f"{name}.cu")
        out = os.path.join(tmp, f"{name}.cubin")
        with open(src, "w") as f:
            f.write(source)
        cmd = [nvcc, "-cubin", f"-arch={arch}", "-O3", *opts, "-o", out, src]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        log = (proc.stdout + proc.stderr).replace(tmp + os.sep, "")
        if proc.returncode != 0 or not os.path.isfile(out):
            raise _compile_error("nvcc", arch, log, source, f"{name}.cu", cmd)
        with open(out, "rb") as f:
            return f.read(), None, log


def _source_excerpt(source: str, filename: str, log: str, context: int = 2, limit: int = 8) -> str:
    """The generated lines that the log's errors point at, each with a little context."""
    lines = source.splitlines()
    wanted: List[int] = []
    for m in _LOG_LINE_RE.finditer(log):
        if m.group("kind") == "error" and os.path.basename(m.group("file")) == filename:
            line = int(m.group("line"))
            if line not in wanted and 1 <= line <= len(lines):
                wanted.append(line)
    if not wanted:
        return ""
    shown: List[str] = []
    last = 0
    for line in wanted[:limit]:
        lo, hi = max(1, line - context, last + 1), min(len(lines), line + context)
        if shown and lo > last + 1:
            shown.append("     ...")
        for i in range(lo, hi + 1):
            marker = ">" if i == line else " "
            shown.append(f"{marker}{i:5d} | {lines[i - 1]}")
        last = max(last, hi)
    if len(wanted) > limit:
        shown.append(f"     ... ({len(wanted) - limit} more error lines)")
    return "\n".join(shown)


def _compile_error(backend: str, arch: str, log: str, source: str, filename: str,
                   cmd: Sequence[str]) -> CompileError:
    excerpt = _source_excerpt(source, filename, log)
    parts = [f"CUDA compilation failed ({backend}, {arch})", log.strip()]
    if excerpt:
        parts.append(f"generated source ({filename}):\n{excerpt}")
    parts.append("command: " + " ".join(str(c) for c in cmd))
    err = CompileError("\n\n".join(parts),
                       hint="tegula.jit(...).get_kernel_source() shows the full generated source")
    err.log = log
    err.source = source
    return err
