"""Machine models of the Ascend NPUs tegula targets: ``a2a3`` (910B, arch 220x) and ``a5`` (950).

One :class:`Machine` per chip gives its cores, on-chip buffers (capacity, alignment, which core
owns them), pipes and the copy paths each pipe serves, fractal rules and sync limits. Every
figure cites its source in ``SOURCES`` (the facts are collected in ``shared/reference/ascend.md``,
which cites the TileLang-Ascend adapters, upstream TileLang's 950 backend, the PTO ISA repository
and vendor documentation). Passes, the emulator and the emitters read these tables and nothing
else, so a number lives in one place.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from tegula.errors import ConfigError

KB = 1024

# Where the numbers below come from (keys are referenced by the tables).
SOURCES = {
    "ascend-c-docs": "vendor Ascend C documentation: buffers, pipes, HardEvent list, flag ids 0-7",
    "tilelang-ascend": "tile-ai/tilelang-ascend (branches ascendc_pto, npuir): A2/A3 dialect, copy "
                       "paths, cross-core flags 0-10, InsertSync",
    "tilelang-950": "upstream TileLang tilelang/ascend + src/ascend: 950 dialect, UB 248 KB usable, "
                    "direct UB<->L1 and L0C->UB paths",
    "pto-isa": "PTO ISA repository: Tile types, fractal index maps (K-major [c/C0, r/16, r%16, c%C0], "
               "L0C [c/16, r/16, r%16, c%16]), 16 x C0 fractals",
    "910b-spec": "910B2 public specification: 24 AIC / 48 AIV at 1.8 GHz, 16x16x16 cube",
}

from tegula.ir.npu import BARRIER_PIPES, FLAG_IDS, HARD_EVENTS, PIPES  # noqa: F401 (re-exported)


@dataclass(frozen=True)
class BufferKind:
    """An on-chip memory: the tegula scope naming it, capacity, alignment, owning core."""

    scope: str
    name: str            # the hardware name (L1, L0A, ..., UB)
    capacity: int        # bytes usable per core
    align: int           # bytes
    core: str            # "C" (AIC) or "V" (AIV)
    source: str


@dataclass(frozen=True)
class Path:
    """A legal copy: from one memory to another on one pipe, with the layout change it makes."""

    src: str             # scope ("global" for GM)
    dst: str
    pipe: str
    core: str
    convert: str = ""    # "nd2nz", "nz2nd", "nz2zz", "nz2zn", ""


@dataclass(frozen=True)
class Machine:
    """One NPU: see the module docstring."""

    name: str
    cores_aic: int
    aiv_per_aic: int
    clock_ghz: float
    buffers: dict
    paths: tuple
    cross_flag_ids: int          # cross-core flag ids per core
    cross_flag_max_pending: int  # sets outstanding per flag
    flag_ids: int = FLAG_IDS     # ids per HardEvent
    cross_modes: tuple = (0, 1, 2)
    sources: dict = field(default_factory=dict)

    def buffer(self, scope: str) -> BufferKind:
        return self.buffers[scope]

    def path(self, src: str, dst: str) -> Optional[Path]:
        """The copy path from scope ``src`` to ``dst``, or None when there is none."""
        for p in self.paths:
            if p.src == src and p.dst == dst:
                return p
        return None

    def legal_paths(self) -> list[str]:
        return [f"{_hw(self, p.src)} -> {_hw(self, p.dst)}" for p in self.paths]


def _hw(m: Machine, scope: str) -> str:
    return "GM" if scope == "global" else m.buffers[scope].name


def c0(itemsize: int) -> int:
    """Elements per 32-byte fractal row: 16 for fp16, 32 for int8, 8 for fp32 (pto-isa)."""
    return 32 // itemsize


FRACTAL_ROWS = 16  # every fractal has 16 rows; L0C fractals are 16 x 16 elements (pto-isa)

_A2A3_BUFFERS = {
    "l1": BufferKind("l1", "L1", 512 * KB, 32, "C", "ascend-c-docs"),
    "l0a": BufferKind("l0a", "L0A", 64 * KB, 512, "C", "ascend-c-docs"),
    "l0b": BufferKind("l0b", "L0B", 64 * KB, 512, "C", "ascend-c-docs"),
    "l0c": BufferKind("l0c", "L0C", 128 * KB, 64, "C", "ascend-c-docs"),
    # 192 KB per AIV; tegula does not reserve the top 8 KB some runtimes keep (ascend.md)
    "ub": BufferKind("ub", "UB", 192 * KB, 32, "V", "ascend-c-docs"),
}

_COMMON_PATHS = (
    Path("global", "l1", "MTE2", "C", "nd2nz"),
    Path("global", "ub", "MTE2", "V"),
    Path("l1", "l0a", "MTE1", "C", "nz2zz"),
    Path("l1", "l0b", "MTE1", "C", "nz2zn"),
    Path("l0c", "global", "FIX", "C", "nz2nd"),
    Path("l0c", "l1", "FIX", "C"),
    Path("ub", "global", "MTE3", "V"),
    Path("ub", "ub", "V", "V"),
)

A2A3 = Machine(
    name="a2a3", cores_aic=24, aiv_per_aic=2, clock_ghz=1.8, buffers=_A2A3_BUFFERS,
    # UB -> L1 is listed by the A2/A3 adapter's T.copy (through MTE3)
    paths=_COMMON_PATHS + (Path("ub", "l1", "MTE3", "V", "nd2nz"),),
    cross_flag_ids=11, cross_flag_max_pending=16, sources={"all": "tilelang-ascend, ascend-c-docs, 910b-spec"})

A5 = Machine(
    name="a5", cores_aic=32, aiv_per_aic=2, clock_ghz=1.65,
    buffers={**_A2A3_BUFFERS,
             "l0c": BufferKind("l0c", "L0C", 256 * KB, 64, "C", "tilelang-950"),
             "ub": BufferKind("ub", "UB", 248 * KB, 32, "V", "tilelang-950")},
    paths=_COMMON_PATHS + (Path("ub", "l1", "MTE3", "V", "nd2nz"),
                           Path("l0c", "ub", "FIX", "C", "nz2nd"),
                           Path("l1", "ub", "MTE1", "C")),
    cross_flag_ids=16, cross_flag_max_pending=16, cross_modes=(0, 1, 2, 4),
    sources={"all": "tilelang-950, pto-isa"})

MACHINES = {"a2a3": A2A3, "a5": A5}


def machine(name: Optional[str]) -> Machine:
    """The machine model named ``name`` ("a2a3" when None)."""
    key = (name or "a2a3").lower()
    if key not in MACHINES:
        raise ConfigError(f"unknown Ascend machine {name!r}; expected one of {sorted(MACHINES)}")
    return MACHINES[key]
