"""tegula/ir/ is the ground floor: none of its modules imports a layer above it."""
import ast
from pathlib import Path

import tegula.ir as ir_pkg
from tegula.ir import expr as E
from tegula.ir.buffer import Buffer

IR = Path(ir_pkg.__file__).parent
ABOVE = ("tegula.arith", "tegula.layout", "tegula.language", "tegula.transform", "tegula.runtime",
         "tegula.backends", "tegula.compat", "tegula.autotuner", "tegula.tools", "tegula.jit",
         "tegula.target")


def test_ir_imports_nothing_above_it():
    for path in sorted(IR.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):  # function-local imports count too
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            for n in names:
                assert not n.startswith(ABOVE), f"{path.name} imports {n}"


def test_region_extents_and_loop_bounds_still_cancel():
    i, n = E.Var("i"), E.Var("n")
    A = Buffer("A", (1024, 64), "float32")
    r = A[i * 64: i * 64 + 64, 0:n]
    assert r.ranges[0][1] == 64 and str(r.ranges[1][1]) == "n"
    r = A[(i + 1) * 32 - 32: i * 32 + 16, :]
    assert r.ranges[0][1] == 16 and r.ranges[1][1] == 64
