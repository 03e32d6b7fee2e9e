"""Published figures of NVIDIA data-center and workstation GPUs, for roofline estimates and tile
hints (:mod:`tegula.compat.carver`, :mod:`tegula.tools.analyzer`).

Peaks are the vendor's dense (no sparsity) tensor-core figures in TFLOP/s (TOP/s for int8), the
CUDA-core fp32 figure, and the DRAM bandwidth in GB/s, from the product data sheets (SXM parts
where there are several). They are models of a GPU, not measurements of the one in this machine.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional


@dataclass(frozen=True)
class GpuSpec:
    name: str
    capability: tuple[int, int]
    sms: int
    tflops: dict = field(default_factory=dict)   # "float16" / "float8" / "int8" / "float32" -> peak
    dram_GBps: float = 0.0
    smem_per_block: int = 48 * 1024              # bytes a block may use (opt-in maximum)
    l2_bytes: int = 0
    registers_per_block: int = 65536
    sfu_tflops: float = 0.0                      # special functions (exp2, ...), 0: unknown
    l2_tile_GBps: float = 0.0                    # L2 -> SM tile bandwidth of all SMs, 0: unknown

    def peak_tflops(self, dtype: str) -> Optional[float]:
        """Peak for a gemm whose inputs are ``dtype`` (bfloat16 counts as float16); None when
        the GPU has no tensor-core path for it."""
        d = str(dtype)
        key = ("float16" if d in ("float16", "bfloat16") else "float8" if d.startswith("float8")
               else "int8" if d in ("int8", "uint8") else "float32" if d == "float32" else d)
        return self.tflops.get(key)


KB, MB = 1024, 1024 * 1024
GPUS: tuple[GpuSpec, ...] = (
    GpuSpec("A100", (8, 0), 108, {"float16": 312.0, "int8": 624.0, "float32": 19.5}, 2039.0, 163 * KB, 40 * MB),
    GpuSpec("A10", (8, 6), 72, {"float16": 125.0, "int8": 250.0, "float32": 31.2}, 600.0, 99 * KB, 6 * MB),
    GpuSpec("L40S", (8, 9), 142, {"float16": 362.0, "float8": 733.0, "int8": 733.0, "float32": 91.6},
            864.0, 99 * KB, 96 * MB),
    GpuSpec("RTX 4090", (8, 9), 128, {"float16": 165.2, "float8": 330.3, "int8": 660.6, "float32": 82.6},
            1008.0, 99 * KB, 72 * MB),
    GpuSpec("H100 PCIe", (9, 0), 114, {"float16": 756.0, "float8": 1513.0, "int8": 1513.0, "float32": 51.2},
            2000.0, 227 * KB, 50 * MB),
    # sfu: the 3.9 TFLOP/s of special functions the FlashAttention-3 paper gives for H100 SXM5;
    # l2_tile: fitted to the H200 GEMM 4096^3 of BENCHMARKS.md (60 GB/s per SM), not a data sheet's
    GpuSpec("H100", (9, 0), 132, {"float16": 989.4, "float8": 1978.9, "int8": 1978.9, "float32": 66.9},
            3350.0, 227 * KB, 50 * MB, sfu_tflops=3.9, l2_tile_GBps=7900.0),
    GpuSpec("H200", (9, 0), 132, {"float16": 989.4, "float8": 1978.9, "int8": 1978.9, "float32": 66.9},
            4800.0, 227 * KB, 50 * MB, sfu_tflops=3.9, l2_tile_GBps=7900.0),
    GpuSpec("B200", (10, 0), 148, {"float16": 2250.0, "float8": 4500.0, "int8": 4500.0, "float32": 80.0},
            8000.0, 227 * KB, 126 * MB),
)
# the part a compute capability most likely is, when the name is not in the table
BY_CAPABILITY = {(8, 0): "A100", (8, 6): "A10", (8, 9): "L40S", (9, 0): "H100", (10, 0): "B200"}


def find(name: str) -> Optional[GpuSpec]:
    """The entry whose name ``name`` contains or equals (case-insensitive, longest match first:
    "NVIDIA H100 PCIe" is the PCIe part); None when there is none."""
    n = name.lower().replace("nvidia", "").replace("-", " ").strip()
    for g in sorted(GPUS, key=lambda g: -len(g.name)):
        if g.name.lower() in n or n == g.name.lower():
            return g
    return None


def for_capability(capability: tuple[int, int]) -> Optional[GpuSpec]:
    name = BY_CAPABILITY.get(tuple(capability))  # type: ignore[arg-type]
    return find(name) if name else None
