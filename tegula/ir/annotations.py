"""Typed keys of ``Kernel.annotations``: what passes hand each other about a kernel.

Each key is a :class:`KernelKey` with its name (the annotation's key, as the printer shows it), the
shape its value must have and what it means; passes read and write through the key
(``SWIZZLE.get(k.annotations)``, ``{**ann, SWIZZLE.name: (4, "row")}``) instead of spelling the
string, and the IR verifier (:func:`tegula.ir.verify.verify`) reports a value of the wrong shape
under its key's name. Keys not listed here are still plain strings (see the list in
``docs/architecture.md``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional


@dataclass(frozen=True)
class KernelKey:
    """One annotation of a kernel: ``name`` (its key), ``ok(value)`` (whether the value has the
    right shape), ``shape`` (that shape in words, for the verifier's message), ``doc``."""

    name: str
    ok: Callable[[Any], bool]
    shape: str
    doc: str

    def get(self, annotations: dict, default: Any = None) -> Any:
        """The value in ``annotations`` (``default`` when absent)."""
        return annotations.get(self.name, default)

    def problem(self, annotations: dict) -> Optional[str]:
        """Why the value in ``annotations`` does not fit, or None (absent counts as fitting)."""
        if self.name not in annotations or annotations[self.name] is None:
            return None
        v = annotations[self.name]
        return None if self.ok(v) else f"annotation {self.name!r} must be {self.shape}, got {v!r}"


def _ints(n_min: int, n_max: int) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, (tuple, list)) and n_min <= len(v) <= n_max and \
        all(isinstance(x, int) and x >= 1 for x in v)


def _swizzle(v: Any) -> bool:
    return isinstance(v, (tuple, list)) and len(v) == 2 and isinstance(v[1], str) and v[1] in ("row", "col") \
        and (isinstance(v[0], int) or hasattr(v[0], "dtype"))


def _map_of(value_ok: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, dict) and all(value_ok(x) for x in v.values())


CLUSTER = KernelKey("cluster", _ints(2, 3), "a tuple of 2 or 3 positive ints",
                    "the thread block cluster the kernel launches in (T.Kernel's cluster_dims; TMA multicast)")
SWIZZLE = KernelKey("swizzle", _swizzle, "(panel, 'row' | 'col')",
                    "the block rasterization (T.use_swizzle, RasterBlocks): strips of panel columns or rows")
LAYOUT_MAP = KernelKey("layout_map", lambda v: isinstance(v, dict), "a dict of buffer -> layout",
                       "the layouts of fragments and shared tiles (T.annotate_layout, InferLayouts)")
TMA_MAPS = KernelKey("tma_maps", lambda v: isinstance(v, (list, tuple)), "a list of TMA tensor maps",
                     "the TMA tensor maps lowering made kernel parameters")
SMEM_OFFSETS = KernelKey("smem_offsets", _map_of(lambda x: isinstance(x, int) and x >= 0),
                         "a dict of buffer -> byte offset (an int >= 0)",
                         "where each shared buffer starts in the block's shared memory (PlanSharedMemory)")
SMEM_BYTES = KernelKey("smem_bytes", lambda v: isinstance(v, int) and v >= 0, "an int >= 0",
                       "the block's shared memory in bytes (PlanSharedMemory)")

KERNEL_KEYS: tuple[KernelKey, ...] = (CLUSTER, SWIZZLE, LAYOUT_MAP, TMA_MAPS, SMEM_OFFSETS, SMEM_BYTES)
