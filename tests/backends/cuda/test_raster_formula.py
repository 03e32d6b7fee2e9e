"""One block-rasterization formula (``tegula/ir/raster.py``): the CUDA source prints it, the
emulator evaluates it; on random grids and strip widths (ragged last strips included) both give the same block for every linear id, and that block
order is the documented one (a bijection of the grid, strips walked row by row)."""
import re
import sys
import types
from pathlib import Path

import numpy as np
import pytest

from tegula.backends.cuda.codegen import codegen
from tegula.backends.emu import _logical
from tegula.ir.raster import strips

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_codegen import swizzle_count  # noqa: E402


def _reference(gx: int, gy: int, panel: int, order: str) -> list[tuple[int, int]]:
    """The rasterization as documented, written out independently: strips of ``panel``
    columns (``row``) or rows (``col``), the last one narrower, each walked across."""
    cells = []
    fast_n, slow_n = (gx, gy) if order == "row" else (gy, gx)
    for start in range(0, fast_n, panel):
        width = min(panel, fast_n - start)
        for slow in range(slow_n):
            for fast in range(start, start + width):
                cells.append((fast, slow) if order == "row" else (slow, fast))
    return cells


_C_LINE = re.compile(r"const int (\w+) = (.*);$")


def _from_source(gx: int, gy: int, panel: int, order: str) -> list[tuple[int, int]]:
    """(bx, by) per linear id as the generated CUDA computes them: its rasterization lines run
    as Python (the casts dropped, ``tl::`` helpers by their meaning, every value non-negative)."""
    src = codegen(swizzle_count(gx, gy, panel, order)).source
    lines = src[src.index("// block rasterization"):].splitlines()[1:]
    code = []
    for line in lines:
        m = _C_LINE.match(line.strip())
        if m is None:
            break
        text = re.sub(r"\((int|unsigned)\)", "", m.group(2))
        text = re.sub(r"(\d+)u\b", r"\1", text).replace("tl::", "").replace(" / ", " // ")
        code.append(f"{m.group(1)} = {text}")
    assert [c.split(" = ")[0] for c in code][-2:] == ["bx", "by"], code
    fn = compile("\n".join(code), "raster", "exec")
    out = []
    for lid in range(gx * gy):
        env = {"blockIdx": types.SimpleNamespace(x=lid % gx, y=lid // gx), "gridDim": types.SimpleNamespace(x=gx, y=gy),
               "floordiv": lambda a, b: a // b, "floormod": lambda a, b: a % b, "min": min}
        exec(fn, env)
        out.append((env["bx"], env["by"]))
    return out


def _from_emulator(gx: int, gy: int, panel: int, order: str) -> list[tuple[int, int]]:
    k = swizzle_count(gx, gy, panel, order).body
    ck = types.SimpleNamespace(kernel=k, block_slots=[0, 1])
    return list(zip(*_logical(ck, gx, gy)))


def _cases(n: int = 24) -> list[tuple[int, int, int, str]]:
    rng = np.random.default_rng(20261201)
    cases = [(7, 5, 2, "row"), (5, 9, 4, "col"), (3, 3, 8, "row"), (1, 6, 2, "col"), (6, 4, 3, "row")]
    while len(cases) < n:
        gx, gy, panel = (int(v) for v in rng.integers(1, 14, 3))
        cases.append((gx, gy, panel, str(rng.choice(["row", "col"]))))
    return cases


@pytest.mark.parametrize("gx,gy,panel,order", _cases())
def test_codegen_and_emulator_agree(gx, gy, panel, order):
    want = _reference(gx, gy, panel, order)
    assert sorted(want) == sorted((x, y) for x in range(gx) for y in range(gy))
    assert _from_source(gx, gy, panel, order) == want
    assert _from_emulator(gx, gy, panel, order) == want


def test_ragged_strips_are_among_the_cases():
    assert any((gx if o == "row" else gy) % p for gx, gy, p, o in _cases())


def test_strips_reads_the_annotation():
    assert strips({"swizzle": (4, "col")}) == (4, "col")
    assert strips({"swizzle": (0, "row")}) is None and strips({"swizzle": (3, "diag")}) is None
    assert strips({}) is None


def test_launch_order_without_strips():
    k = swizzle_count(5, 3, 2, "row").body
    plain = types.SimpleNamespace(kernel=types.SimpleNamespace(annotations={}), block_slots=[0, 1])
    assert list(zip(*_logical(plain, 5, 3))) == [(x, y) for y in range(3) for x in range(5)]
    one_d = types.SimpleNamespace(kernel=k, block_slots=[0])   # strips need two block indices
    assert list(zip(*_logical(one_d, 4, 1))) == [(x, 0) for x in range(4)]
