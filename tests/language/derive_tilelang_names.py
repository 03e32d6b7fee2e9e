"""Derive the public names of TileLang 0.1.15's `tilelang.language` from its sources.

    python tests/language/derive_tilelang_names.py /tmp/peers/tilelang > tests/language/tilelang_0_1_15_names.txt

`tilelang.language` is `from tilelang.cuda.language import *` with that module's `__all__`, which
is built from a dozen other modules' `__all__` (TVM's TIR script builder, the common TileLang
surface, the CUDA dialect's own names). Importing TileLang needs its native library, so this reads
the assignments with `ast` and evaluates the few forms they use (literals, `+`, `|`, `-`, `*x`,
`tuple`/`list`/`sorted`/`frozenset`/`dict.fromkeys`, a filtering generator, `X.__all__` of another
module). The names are only data for `test_tilelang_surface.py`: no TileLang code is kept.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/peers/tilelang")
TVM_IR = ROOT / "3rdparty/tvm/python/tvm/tirx/script/builder/ir.py"

# module path (relative to ROOT) -> the names its `__all__` uses from other modules
MODULES = {
    "language/dtypes.py": {},
    "language/eager/__init__.py": {"_dtypes_all": ("language/dtypes.py", "__all__")},
    "language/tir/exports.py": {},
    "language/tir/ir.py": {},
    "language/math_intrinsics.py": {},
    "language/tir/common.py": {
        "_parser.__all__": ("<tvm-parser>", "__all__"),
        "BACKEND_ONLY_TIR_EXPORTS": ("language/tir/exports.py", "BACKEND_ONLY_TIR_EXPORTS"),
    },
    "language/common.py": {
        "_TIR_COMMON_ALL": ("language/tir/common.py", "__all__"),
        "_EAGER_ALL": ("language/eager/__init__.py", "__all__"),
        "_TIR_IR_ALL": ("language/tir/ir.py", "__all__"),
        "_MATH_ALL": ("language/math_intrinsics.py", "COMMON_MATH_INTRINSICS"),
    },
    "cuda/language/tir.py": {
        "CUDA_ONLY_TIR_EXPORTS": ("language/tir/exports.py", "CUDA_ONLY_TIR_EXPORTS"),
        "SHARED_LEGACY_TIR_EXPORTS": ("language/tir/exports.py", "SHARED_LEGACY_TIR_EXPORTS"),
    },
    "cuda/language/__init__.py": {
        "_COMMON_ALL": ("language/common.py", "__all__"),
        **{
            f"_{part.upper()}_ALL": (f"cuda/language/{part}.py", "__all__")
            for part in ("cluster", "intrinsics", "math", "pdl", "print", "random", "tir", "warpgroup")
        },
    },
}


def _tvm_parser_all() -> list[str]:
    """TVM's `tvm.tirx.script.parser.__all__`: the builder's `__all__` plus five names."""
    src = TVM_IR.read_text()
    tail = src[src.index("\nbases = [") :]  # the dtype tables and `__all__`, plain Python
    ns: dict = {}
    exec(compile(tail, str(TVM_IR), "exec"), ns)  # literals and a loop only
    return list(ns["__all__"]) + ["Buffer", "Ptr", "bool", "prim_func", "macro"]


_cache: dict[tuple[str, str], object] = {}


def value(module: str, name: str):
    key = (module, name)
    if key not in _cache:
        if module == "<tvm-parser>":
            _cache[key] = _tvm_parser_all()
        else:
            tree = ast.parse((ROOT / module).read_text())
            node = None
            for stmt in tree.body:
                if isinstance(stmt, ast.Assign) and any(
                    isinstance(t, ast.Name) and t.id == name for t in stmt.targets
                ):
                    node = stmt.value
            if node is None:
                raise KeyError(f"{module}: no assignment to {name}")
            _cache[key] = _eval(node, module)
    return _cache[key]


def _eval(node: ast.AST, module: str):
    imports = MODULES.get(module, {})
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        out: list = []
        for elt in node.elts:
            if isinstance(elt, ast.Starred):
                out.extend(_eval(elt.value, module))
            else:
                out.append(_eval(elt, module))
        return set(out) if isinstance(node, ast.Set) else out
    if isinstance(node, (ast.Name, ast.Attribute)):
        text = ast.unparse(node)
        if text in imports:
            return value(*imports[text])
        return value(module, text)
    if isinstance(node, ast.BinOp):
        a, b = _eval(node.left, module), _eval(node.right, module)
        if isinstance(node.op, ast.Add):
            return list(a) + list(b)
        if isinstance(node.op, ast.BitOr):
            return set(a) | set(b)
        if isinstance(node.op, ast.Sub):
            return set(a) - set(b)
    if isinstance(node, ast.Call):
        fn = ast.unparse(node.func)
        args = [_eval(a, module) for a in node.args]
        table = {"tuple": list, "list": list, "sorted": sorted, "frozenset": set, "set": set,
                 "dict.fromkeys": lambda xs: list(dict.fromkeys(xs))}
        return table[fn](*args)
    if isinstance(node, ast.GeneratorExp):
        (gen,) = node.generators
        items = _eval(gen.iter, module)
        cond = gen.ifs[0] if gen.ifs else None
        if cond is None:
            return list(items)
        assert isinstance(cond, ast.Compare) and isinstance(cond.ops[0], ast.NotIn)
        excluded = set(_eval(cond.comparators[0], module))
        return [x for x in items if x not in excluded]
    raise NotImplementedError(f"{module}: {ast.unparse(node)}")


def main() -> None:
    names = list(dict.fromkeys(value("cuda/language/__init__.py", "__all__")))
    print("# The public names of TileLang 0.1.15's `tilelang.language` (its `__all__`, which is the CUDA")
    print("# dialect's: tilelang/cuda/language/__init__.py), one a line, in TileLang's order.")
    print("# Derived from the sources by tests/language/derive_tilelang_names.py; checked by")
    print(f"# tests/language/test_tilelang_surface.py. {len(names)} names.")
    for n in names:
        print(n)


if __name__ == "__main__":
    main()
