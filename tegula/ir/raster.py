"""Block rasterization: which ``(bx, by)`` the ``L``-th block of a launch computes.

``annotations["swizzle"] = (panel, order)`` (``T.use_swizzle``, RasterBlocks) walks a 2-d grid
of ``gx x gy`` blocks in strips. Order ``"row"`` cuts the grid into strips of ``panel`` columns,
the last one narrower when ``panel`` does not divide ``gx``, and walks each strip row by row::

    s = L // (panel * gy);  r = L % (panel * gy);  w = min(panel, gx - s * panel)
    bx = s * panel + r % w;  by = r // w

Order ``"col"`` is the same with the roles of x and y swapped (strips of ``panel`` rows walked
column by column). A strip holds exactly ``w * gy`` consecutive ids, so this is a bijection of
the grid, ragged last strip included. Without strips the order is the launch order
(``bx = L % gx``, ``by = L // gx``).

:func:`block_coords` builds the formula as IR once; CUDA codegen prints it, the emulator
evaluates it over every block id at once, so the two cannot disagree.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, Optional

from tegula.ir.annotations import SWIZZLE
from tegula.ir import expr as E


def strips(annotations: Mapping[str, Any]) -> Optional[tuple[int, str]]:
    """``(panel, order)`` of a kernel's ``annotations["swizzle"]`` when it rasterizes (a panel
    above 0, order ``"row"`` or ``"col"``), else None (launch order)."""
    swz = SWIZZLE.get(annotations)
    if not swz or swz[1] not in ("row", "col") or int(swz[0]) <= 0:
        return None
    return int(swz[0]), str(swz[1])


def _inline(name: str, value: E.Expr) -> E.Expr:
    return value


def block_coords(lid: Any, gx: Any, gy: Any, raster: Optional[tuple[int, str]],
                 let: Callable[[str, E.Expr], E.Expr] = _inline) -> tuple[E.Expr, E.Expr]:
    """``(bx, by)`` of linear block id ``lid`` of a ``gx x gy`` grid walked by ``raster``
    (``(panel, order)`` from :func:`strips`; None: launch order). Operands are expressions or
    ints; the result is IR (constants fold). ``let(name, value)`` gives what stands for each
    intermediate (``strip``, ``rem``, ``width``): by default the value itself; codegen binds a
    named constant instead."""
    lid = E.as_expr(lid)
    if raster is None:
        return lid % gx, lid // gx
    panel, order = raster
    fast_n, slow_n = (gx, gy) if order == "row" else (gy, gx)
    strip = let("strip", lid // (panel * slow_n))
    rem = let("rem", lid % (panel * slow_n))
    width = let("width", E.minimum(panel, fast_n - strip * panel))
    fast, slow = strip * panel + rem % width, rem // width
    return (fast, slow) if order == "row" else (slow, fast)
