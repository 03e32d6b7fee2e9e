"""``tilelang.carver``: descriptions of a GPU and tile hints for GEMMs, as TileLang programs call
them (``carver.arch.CUDA``, ``carver.arch.driver``, ``carver.template.MatmulTemplate``,
``carver.roller.rasterization``).

``CUDA(target)`` describes the GPU in this process (``CUDA("cuda")``) or a named one
(``CUDA("H200")``, ``CUDA("cuda", device="A100")``, ``CUDA("sm_80")``: the usual part of that
arch), with the published figures of :mod:`tegula.compat.gpus`. ``MatmulTemplate(...).with_arch(
arch).recommend_hints(topk)`` ranks GEMM tiles by a small model of its own: tiles whose pipelined
shared-memory stages fit the GPU and whose accumulator fits 128 registers per thread, scored by
how evenly the blocks fill the multiprocessors (waves), the share of the tiles inside the matrix,
the tile's arithmetic intensity and the stages that fit.
"""
from __future__ import annotations

import dataclasses

import math
import types
from dataclasses import dataclass, field
from typing import Any, Optional

from tegula.compat import device as _device
from tegula.compat import gpus
from tegula.errors import ConfigError, UnsupportedError
from tegula.ir import dtype as dt
from tegula.kernels import gemm_kernel


# target strings that mean "the GPU of this process" (a tegula target names where kernels run;
# the device model is the GPU that is present)
_CURRENT = ("cuda", "nvidia", "auto", "cpu", "cuda-emu")


class TileDevice:
    """What every device description has (TileLang's attribute names)."""

    platform = "unknown"
    warp_size = 32
    reg_cap = 65536
    transaction_size = (32, 128)


class CUDA(TileDevice):
    """An NVIDIA GPU: ``CUDA("cuda")`` (also "auto", "cpu", "cuda-emu") the one of this process,
    ``CUDA("H200")`` or ``CUDA("sm_80")`` a named one. Attributes: ``name``, ``spec`` (:class:`~tegula.compat.gpus.GpuSpec`),
    ``sm_version`` (90), ``compute_capability`` ("90"), ``compute_max_core`` (SMs), ``smem_cap``
    (bytes per block), ``l2_cache_size_bytes``, ``bandwidth`` (``[l2, dram]`` in MB/s, DRAM from
    the data sheet), ``dram_bandwidth_GBps``, ``peak_tflops(dtype)``; ``is_current`` says whether
    it describes the GPU of this process. Raises ConfigError when asked for the current GPU and
    there is none (name one instead), or for a name the table lacks."""

    platform = "CUDA"

    def __init__(self, target: Any = "cuda", device: Optional[str] = None):
        text = str(getattr(target, "arch", None) or target).strip()
        spec: Optional[gpus.GpuSpec] = None
        self.is_current = False
        if device is not None:
            spec = gpus.find(device)
            if spec is None:
                raise ConfigError(f"carver: no figures for a GPU named {device!r}",
                                  hint=f"known: {', '.join(g.name for g in gpus.GPUS)}")
        elif text.lower() in _CURRENT or text.lower().startswith("cuda -"):
            spec = self._current()
            self.is_current = True
        elif text.lower().removeprefix("cuda:").startswith("sm_"):
            digits = text.lower().split("sm_")[1].rstrip("a")
            spec = gpus.for_capability((int(digits[:-1]), int(digits[-1])))
            if spec is None:
                raise ConfigError(f"carver: no figures for arch {text!r}")
        else:
            spec = gpus.find(text)
            if spec is None:
                raise ConfigError(f"carver: {text!r} is neither 'cuda', an arch 'sm_XX' nor a known GPU",
                                  hint=f"known: {', '.join(g.name for g in gpus.GPUS)}")
        self.spec = spec
        self.target = text
        self.name = spec.name if not self.is_current else (_device.device_name() or spec.name)
        major, minor = spec.capability
        self.sm_version = major * 10 + minor
        self.compute_capability = f"{major}{minor}"
        self.compute_max_core = spec.sms
        self.smem_cap = spec.smem_per_block
        self.max_smem_usage = 2 * spec.smem_per_block
        self.l2_cache_size_bytes = spec.l2_bytes
        self.dram_bandwidth_GBps = spec.dram_GBps
        self.sfu_tops = spec.sfu_tflops            # the Analyzer's SFU and L2 tile terms (0: left out)
        self.l2_tile_GBps = spec.l2_tile_GBps
        self.bandwidth = [spec.dram_GBps * 1000 * 4, spec.dram_GBps * 1000]  # MB/s: L2 modelled as 4x DRAM

    @staticmethod
    def _current() -> gpus.GpuSpec:
        cap = _device.compute_capability()
        if cap is None:
            raise ConfigError("carver.arch.CUDA('cuda'): no CUDA GPU in this process",
                              hint="describe a named one instead: CUDA('H100'), CUDA('sm_80')")
        name = _device.device_name() or ""
        spec = gpus.find(name) or gpus.for_capability(cap)
        if spec is None:
            raise ConfigError(f"carver: no figures for {name or 'this GPU'} (compute capability "
                              f"{cap[0]}.{cap[1]})", hint="name a known GPU: CUDA('cuda', device='H100')")
        if spec.sms and _device.multiprocessor_count():
            spec = dataclasses.replace(spec, sms=_device.multiprocessor_count() or spec.sms)
        return spec

    def peak_tflops(self, dtype: Any) -> Optional[float]:
        return self.spec.peak_tflops(str(dtype))

    def __repr__(self) -> str:
        return f"CUDA({self.name}, sm_{self.sm_version}, {self.compute_max_core} SMs)"


def _no_amd(*_: Any, **__: Any) -> Any:
    raise UnsupportedError("tegula targets NVIDIA GPUs (and Ascend NPUs): there is no AMD device model",
                           hint="use carver.arch.CUDA")


class CDNA(TileDevice):
    """AMD CDNA GPUs: not a tegula target; constructing one is an UnsupportedError."""

    platform = "CDNA"

    def __init__(self, *a: Any, **k: Any):
        _no_amd()


def auto_infer_current_arch() -> CUDA:
    return CUDA("cuda")


def _driver_value(what: str, value: Optional[int]) -> int:
    if value is None:
        raise ConfigError(f"carver.arch.driver.{what}: no CUDA GPU in this process")
    return value


driver = types.SimpleNamespace(
    get_num_sms=lambda device_id=0: _driver_value("get_num_sms", _device.multiprocessor_count(device_id)),
    get_device_name=lambda device_id=0: _device.device_name(device_id),
    get_shared_memory_per_block=lambda device_id=0, format="bytes": CUDA("cuda").smem_cap,
    get_max_dynamic_shared_size_bytes=lambda device_id=0, format="bytes": CUDA("cuda").smem_cap,
    get_registers_per_block=lambda device_id=0: 65536,
    get_l2_cache_size=lambda device_id=0: CUDA("cuda").l2_cache_size_bytes,
)


# -- rasterization plans ---------------------------------------------------------------------------
class NoRasterization:
    """Blocks in launch order."""

    panel_width = 0

    def __repr__(self) -> str:
        return "NoRasterization()"


@dataclass
class Rasterization2DRow:
    """Blocks in panels of ``panel_width`` rows (``T.use_swizzle(panel_width)``)."""

    panel_width: int = 8


@dataclass
class Rasterization2DColumn:
    panel_width: int = 8


# -- hints ---------------------------------------------------------------------------------------
@dataclass
class Hint:
    """One tile configuration: ``block`` [M, N], ``warp`` [M, N] per warp, ``rstep`` [K],
    ``pipeline_stage``, ``rasterization_plan``, ``use_tc``, and the model's ``score``."""

    block: list
    warp: list
    rstep: list
    pipeline_stage: int
    rasterization_plan: Any = field(default_factory=NoRasterization)
    use_tc: bool = True
    score: float = 0.0

    def to_dict(self) -> dict:
        bm, bn = self.block
        wm, wn = self.warp
        return {"block_M": bm, "block_N": bn, "block_K": self.rstep[0], "num_stages": self.pipeline_stage,
                "thread_num": (bm // wm) * (bn // wn) * 32,
                "enable_rasteration": not isinstance(self.rasterization_plan, NoRasterization)}


class MatmulTemplate:
    """``MatmulTemplate(M, N, K, in_dtype, out_dtype, accum_dtype).with_arch(arch)``; then
    ``recommend_hints(topk)`` (a list of :class:`Hint`, best first) and ``equivalent_function()``
    (a ``@T.prim_func`` GEMM with the best hint's tiles)."""

    def __init__(self, M: int, N: int, K: int, in_dtype: Any = "float16", out_dtype: Any = "float16",
                 accum_dtype: Any = "float32", with_bias: bool = False):
        self.M, self.N, self.K = int(M), int(N), int(K)
        self.in_dtype, self.out_dtype = dt.as_dtype(str(in_dtype)), dt.as_dtype(str(out_dtype))
        self.accum_dtype = dt.as_dtype(str(accum_dtype))
        self.arch: Optional[CUDA] = None

    def with_arch(self, arch: CUDA) -> "MatmulTemplate":
        self.arch = arch
        return self

    def _arch(self) -> CUDA:
        if self.arch is None:
            raise ConfigError("MatmulTemplate: call .with_arch(CUDA(...)) first")
        return self.arch

    def recommend_hints(self, topk: int = 10) -> list:
        arch = self._arch()
        item = self.in_dtype.itemsize
        hints = []
        for bm in (64, 128, 256):
            for bn in (64, 128, 256):
                for bk in (32, 64):
                    for warps in (4, 8):
                        wm, wn = _warp_tile(bm, bn, warps)
                        if wm < 16 or wn < 8:
                            continue
                        stage_bytes = (bm + bn) * bk * item
                        stages = min(4, arch.smem_cap // stage_bytes)
                        if stages < 1 or (self.K + bk - 1) // bk < 1:
                            continue
                        blocks = math.ceil(self.M / bm) * math.ceil(self.N / bn)
                        waves = math.ceil(blocks / arch.compute_max_core)
                        fill = blocks / (waves * arch.compute_max_core)
                        waste = (self.M * self.N) / (math.ceil(self.M / bm) * bm * math.ceil(self.N / bn) * bn)
                        if bm * bn // (warps * 32) > 128:  # accumulator registers per thread
                            continue
                        intensity = bm * bn / (bm + bn) / 128  # 1.0 for 256x256
                        score = fill * waste * (0.5 + intensity) * (1 + 0.05 * min(stages, 3))
                        raster = Rasterization2DRow(10) if blocks > 2 * arch.compute_max_core else NoRasterization()
                        hints.append(Hint([bm, bn], [wm, wn], [bk], max(1, min(stages, 3)), raster, True, score))
        hints.sort(key=lambda h: -h.score)
        return hints[:topk]

    def equivalent_function(self) -> Any:
        best = self.recommend_hints(1)[0]
        return gemm_kernel(self.M, self.N, self.K, best.block[0], best.block[1], best.rstep[0],
                           self.in_dtype.name, self.accum_dtype.name, self.out_dtype.name)


def _warp_tile(bm: int, bn: int, warps: int) -> tuple[int, int]:
    """Split ``warps`` over the block as squarely as the tile allows."""
    rows = 1
    while rows * 2 <= warps and (bm // (rows * 2)) >= (bn // (warps // (rows * 2))):
        rows *= 2
    return bm // rows, bn // (warps // rows)

