"""``tilelang.carver.arch.ascend``: an Ascend NPU described for the carver, from tegula's machine
model (:mod:`tegula.backends.npu.machine`).

``Ascend()`` describes the machine the program runs on: the emulated one under
``python -m tegula run --target ascend-emu:ARCH`` (or the Ascend host stand-in), else a2a3.
``Ascend(chip_name=...)`` / ``Ascend("a5")`` names one: an A2/A3 part (``"Ascend910B"``,
``"Ascend910_93"``, ``"a2a3"``) or an A5 one (``"Ascend950"``, ``"a5"``). The attributes are
TileLang-Ascend's (``compute_max_core``: AI cube cores; ``ub_cap``, ``l1_cap``, ``l0a_cap``,
``l0b_cap``, ``l0c_cap`` in bytes per core; ``smem_cap`` = the UB; ``cube_shape`` [16, 16, 16]),
so ``carver.MatmulTemplate(...).with_arch(Ascend()).recommend_hints()`` ranks tiles against them.
"""
from __future__ import annotations

from typing import Any, Optional

from tegula.compat.carver import TileDevice
from tegula.errors import ConfigError

CUBE_SHAPE = (16, 16, 16)  # the cube unit's M, N, K fractal (fp16)
# chip names TileLang-Ascend uses (and tegula's machine names) -> tegula's machine model
_CHIPS = (("950", "a5"), ("910_95", "a5"), ("a5", "a5"), ("910", "a2a3"), ("a2", "a2a3"), ("a3", "a2a3"))
CUBE_PRECISIONS = {"float16": ("float16", "float32"), "bfloat16": ("bfloat16", "float32"),
                   "int8": ("int32",)}


def _machine_name(chip_name: Optional[str]) -> str:
    if chip_name is None:
        from tegula import config

        target = str(config.settings.default_target or "")
        return target.partition(":")[2] or "a2a3" if target.startswith("ascend") else "a2a3"
    key = chip_name.lower().replace("ascend", "")
    for part, name in _CHIPS:
        if part in key:
            return name
    raise ConfigError(f"carver.arch.ascend.Ascend: unknown Ascend chip {chip_name!r}",
                      hint="name an A2/A3 part (Ascend910B, Ascend910_93, 'a2a3') or an A5 one "
                           "(Ascend950, 'a5')")


class Ascend(TileDevice):
    """An Ascend NPU for the carver (see the module docstring). ``target`` is TileLang-Ascend's
    TVM target string; a chip named in it (``-mcpu=...``) or in ``chip_name`` picks the machine."""

    platform = "ascend"
    warp_size = 1
    reg_cap = 0
    transaction_size = (32, 32)

    def __init__(self, target: Any = "llvm -keys=ascend", chip_name: Optional[str] = None):
        from tegula.backends.npu.machine import machine

        text = str(target)
        if chip_name is None and "-mcpu=" in text:
            chip_name = text.split("-mcpu=", 1)[1].split()[0]
        elif chip_name is None and text.lower() in ("a2a3", "a5"):
            chip_name = text
        self.target = target
        self.machine = machine(_machine_name(chip_name))
        self.chip_name = chip_name or f"ascend-emu:{self.machine.name}"
        self.compute_max_core = self.machine.cores_aic
        caps = {kind: buf.capacity for kind, buf in self.machine.buffers.items()}
        self.ub_cap, self.l1_cap = caps["ub"], caps["l1"]
        self.l0a_cap, self.l0b_cap, self.l0c_cap = caps["l0a"], caps["l0b"], caps["l0c"]
        self.smem_cap = self.max_smem_usage = self.ub_cap
        self.cube_spec = list(CUBE_SHAPE)
        self.sm_partition = 1

    @property
    def cube_dim(self) -> int:
        """The cube unit's K."""
        return self.cube_spec[-1]

    @property
    def cube_shape(self) -> list:
        """The cube unit's [M, N, K]."""
        return self.cube_spec

    @property
    def fractal_shape(self) -> tuple:
        """Rows and columns of one fractal."""
        return (self.cube_spec[0], self.cube_spec[1])

    def get_avaliable_tensorintrin_shapes(self) -> list:  # TileLang-Ascend's spelling
        """The cube instruction's [M, N]."""
        return [[self.cube_spec[0], self.cube_spec[1]]]

    def __repr__(self) -> str:
        return f"Ascend({self.machine.name}, {self.compute_max_core} cube cores, UB {self.ub_cap} B)"


def is_ascend_arch(arch: Any) -> bool:
    """True for an :class:`Ascend` description."""
    return isinstance(arch, Ascend)


def is_cube_supported_precision(in_dtype: str, accum_dtype: str, arch: Any) -> bool:
    """Whether the cube unit multiplies ``in_dtype`` into ``accum_dtype`` (False off Ascend)."""
    return is_ascend_arch(arch) and str(accum_dtype) in CUBE_PRECISIONS.get(str(in_dtype), ())


__all__ = ["Ascend", "is_ascend_arch", "is_cube_supported_precision"]
