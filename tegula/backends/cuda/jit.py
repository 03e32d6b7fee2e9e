"""The ``cuda`` target: lower -> codegen -> compile (with the disk cache) -> :class:`CudaArtifact`.

The arch comes from the target string (``"cuda:sm_90a"``), else from the GPU present
(:func:`~tegula.backends.cuda.compiler.detect_arch`). Building needs a CUDA compiler but no
GPU, so ``tegula.compile(f, target="cuda:sm_80")`` works anywhere NVRTC or nvcc is installed;
running the artifact then needs a GPU and raises a clear error without one.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Optional, Sequence

from tegula.errors import ConfigError, TegulaError
from tegula.ir.stmt import PrimFunc
from tegula.passconfig import split_flags
from tegula.target import Target
from tegula.transform.pipeline import Pipeline, check_pipeline
from tegula.backends.cuda.codegen import CudaModule, codegen
from tegula.backends.cuda import cache, postproc
from tegula.backends.cuda.compiler import CompileResult, compile_cuda, detect_arch


def _param_meta(p: Any) -> dict:
    """A kernel parameter in the cache's metadata; a tensor map with what rebuilds it."""
    out = {"name": p.name, "kind": p.kind, "dtype": p.dtype.name}
    if p.kind == "tmap":
        pos, m = p.source
        out.update(pos=pos, box=list(m.box), swizzle=m.swizzle)
    return out


class CudaArtifact:
    """A compiled CUDA module: ``source`` (CUDA C++), ``cubin``, ``metadata`` and ``run(values)``."""

    def __init__(self, func: PrimFunc, module: CudaModule, result: CompileResult):
        self.func = func
        self.module = module
        self.source = module.source
        self.cubin = result.cubin
        self.arch = result.arch
        self.metadata: dict[str, Any] = {
            "arch": result.arch,
            "compiler": result.backend,
            "compile_seconds": result.seconds,
            "cached": result.cached,
            "log": result.log,
            "kernels": [{"name": k.name, "grid": [str(g) for g in k.grid], "block": list(k.block),
                         "dynamic_smem_bytes": k.smem_bytes} for k in module.kernels],
            "params": [_param_meta(p) for p in module.params],
        }
        self._launcher: Any = None

    @property
    def kernel_names(self) -> list[str]:
        return self.module.kernel_names

    def run(self, values: Sequence[Any]) -> None:
        """Launch the kernels on ``values`` (one per PrimFunc parameter: CUDA tensors and scalars).

        Raises CudaError when no GPU can be used, CompileError when the cubin does not fit the GPU.
        """
        launcher = self._launcher
        if launcher is None:
            from tegula.backends.cuda.launcher import Launcher, driver

            driver()  # a clear error here when there is no GPU
            launcher = self._launcher = Launcher(self.module, self.cubin, self.arch)
        launcher(values)


def resolve_arch(target: Target) -> str:
    """The arch to compile for: the target's, else the GPU's; ConfigError when neither is known."""
    if target.arch:
        return target.arch
    arch = detect_arch()
    if arch is None:
        raise ConfigError("target 'cuda' needs a GPU to detect the arch, and none was found",
                          hint="name the arch to compile ahead of time, e.g. target='cuda:sm_80' "
                               "or 'cuda:sm_90a'")
    return arch


def _options(pass_configs: dict) -> tuple[list[str], bool]:
    options = ["-lineinfo"]
    if pass_configs.get("tl.enable_ptxas_verbose_output"):
        options.append("--ptxas-options=-v")
    options.extend(split_flags(pass_configs.get("tl.device_compile_flags"), "tl.device_compile_flags"))
    fast = bool(pass_configs.get("tl.enable_fast_math")) and not pass_configs.get("tl.disable_fast_math")
    return options, fast


def build_lowered(func: PrimFunc, arch: str, pass_configs: Optional[dict] = None) -> CudaArtifact:
    """Codegen and compile an already lowered (thread-level) ``func`` for ``arch``."""
    cfg = dict(pass_configs or {})
    module = codegen(func, Target("cuda", arch), cfg)
    if postproc.active():
        module = dataclasses.replace(module, source=postproc.apply(module.source, Target("cuda", arch)))
    options, fast = _options(cfg)
    result = compile_cuda(module.source, arch, options=options, name=func.name, fast_math=fast,
                          use_cache=True)
    return CudaArtifact(func, module, result)


_FINGERPRINT: Optional[str] = None


def fingerprint_of(root: "Path") -> str:
    """A hash of the ``.py`` and ``.h`` files under the package directory ``root`` except its
    ``tools/`` folder, by their paths relative to ``root`` (so where it is installed does not
    matter)."""
    import hashlib

    h = hashlib.sha256()
    for f in sorted(root.rglob("*")):
        rel = f.relative_to(root)
        if f.suffix in (".py", ".h") and rel.parts[0] != "tools" and f.is_file():
            h.update(rel.as_posix().encode())
            h.update(f.read_bytes())
    return h.hexdigest()[:16]


def compiler_fingerprint() -> str:
    """A hash of the code that turns tile IR into CUDA (passes, layouts, codegen, headers), so a
    changed compiler never reuses entries of an older one."""
    global _FINGERPRINT
    if _FINGERPRINT is None:
        _FINGERPRINT = fingerprint_of(Path(__file__).resolve().parents[2])
    return _FINGERPRINT


def _ir_key(func: PrimFunc, arch: str, pass_configs: dict, pipeline: Pipeline) -> str:
    """Disk-cache key of a tile-level function: its printed IR, arch, options, the pipeline
    (pass names, options, the source of user passes), and the version and fingerprint of the
    compiler."""
    options, fast = _options(pass_configs)
    cfg = repr(sorted((k, repr(v)) for k, v in pass_configs.items()))
    return cache.cache_key("tile-ir\n" + func.script(), arch,
                           [*options, f"fast={fast}", cfg, f"pipeline={pipeline.fingerprint()}",
                            compiler_fingerprint()])


def _module_from_cache(func: PrimFunc, source: str, meta: dict) -> Optional[CudaModule]:
    """Launch information for a cached build, rebuilt from the tile-level function (the grid,
    block and parameters lowering does not change) and the entry's metadata."""
    from tegula.backends.cuda.codegen import KernelInfo, ParamInfo, _kernels_of, _params

    kernels = _kernels_of(func)
    saved = meta.get("kernels") or []
    if len(saved) != len(kernels):
        return None
    infos = []
    for k, m in zip(kernels, saved):
        grid = tuple(k.grid) + (1,) * (3 - len(k.grid))
        infos.append(KernelInfo(m["name"], grid, tuple(m["block"]), int(m["dynamic_smem_bytes"])))
    params = _params(func)
    from tegula.backends.cuda.passes.lower_tile_ops.lower_tma import TmaMap
    from tegula.ir import dtype as dt
    from tegula.ir.expr import Var

    # the tensor maps are made in lowering, which a cached build skips: rebuilt from the entry
    for m in meta.get("params") or []:
        if m["kind"] == "tmap":
            buf = func.params[int(m["pos"])]
            tm = TmaMap(Var(m["name"], dt.uint64), buf, tuple(int(b) for b in m["box"]), int(m["swizzle"]))
            params.append(ParamInfo(m["name"], "tmap", buf.dtype, (int(m["pos"]), tm), tm.var))
    if [p.name for p in params] != [m["name"] for m in meta.get("params") or []]:
        return None
    return CudaModule(source, infos, params, list(meta.get("headers", [])))


def build(func: PrimFunc, target: Target, pass_configs: dict,
          pipeline: Optional[Pipeline] = None) -> CudaArtifact:
    """The ``cuda`` target's builder: lower ``func`` with ``pipeline`` (default: the target's),
    then build it.

    A function built before (same printed IR, arch, options and pipeline) is loaded from the disk
    cache without lowering or compiling again.
    """
    from tegula import config

    arch = resolve_arch(target)
    target = Target("cuda", arch)
    pipeline = check_pipeline(pipeline, target, pass_configs)
    use_cache = not config.get().disable_cache and not postproc.active()
    key = _ir_key(func, arch, pass_configs, pipeline) if use_cache else ""
    if use_cache:
        hit = cache.load(key)
        if hit is not None:
            source, cubin, meta = hit
            try:
                module = _module_from_cache(func, source, meta)
            except (TegulaError, KeyError, TypeError, ValueError):  # metadata of another shape
                module = None
            if module is not None:
                result = CompileResult(cubin, None, meta.get("log", ""), arch, meta.get("compiler", "?"), 0.0, True)
                return CudaArtifact(func, module, result)
    art = build_lowered(pipeline.run(func), arch, pass_configs)
    if use_cache:
        meta = dict(art.metadata)
        meta["headers"] = list(art.module.headers)
        cache.store(key, art.source, art.cubin, meta)
    return art
