"""Structural equality and hashing of IR trees.

Two trees are structurally equal when they have the same shape, operators, constants and dtypes,
and their variables and buffers correspond one to one by where they first appear (a consistent
bijection, so ``for i ...`` and ``for k ...`` with ``k`` used like ``i`` are equal). Names and
spans are ignored. Pass tests compare a transformed function with the expected one::

    assert_structural_equal(my_pass(before), expected)
"""
from __future__ import annotations

import dataclasses
import hashlib
import math
from typing import Any, Optional

from tegula.ir import hooks
from tegula.ir.buffer import Buffer, BufferRegion
from tegula.ir.dtype import DType
from tegula.ir.expr import Expr, Node, Var
from tegula.ir.visitor import DEF_FIELDS, node_fields

_PRIMITIVE = (int, float, bool, str, type(None))


class _Equal:
    """Compares two trees, recording the path of the first difference."""

    def __init__(self, map_free_vars: bool) -> None:
        self.map_free_vars = map_free_vars
        self.fwd: dict[Any, Any] = {}
        self.bwd: dict[Any, Any] = {}
        self.path = ""
        self.why = ""

    def fail(self, path: str, why: str) -> bool:
        if not self.why:
            self.path, self.why = path or "<root>", why
        return False

    def bind(self, a: Any, b: Any, path: str, define: bool) -> Optional[bool]:
        """Check or create the correspondence a <-> b; None when newly created."""
        if a in self.fwd:
            return True if self.fwd[a] is b else self.fail(path, f"{_name(a)} already matches another {_name(self.fwd[a])}")
        if b in self.bwd:
            return self.fail(path, f"{_name(b)} already matches another {_name(self.bwd[b])}")
        if not define and not self.map_free_vars and a is not b:
            return self.fail(path, f"free {_name(a)} and {_name(b)} are different objects")
        self.fwd[a] = b
        self.bwd[b] = a
        return None

    def var(self, a: Var, b: Var, path: str, define: bool = False) -> bool:
        if a.dtype != b.dtype:
            return self.fail(path, f"var dtypes differ: {a.dtype} vs {b.dtype}")
        known = self.bind(a, b, path, define)
        return True if known is None else known

    def buffer(self, a: Buffer, b: Buffer, path: str, define: bool = False) -> bool:
        known = self.bind(a, b, path, define)
        if known is not None:
            return known
        if a.dtype != b.dtype or a.scope != b.scope:
            return self.fail(path, f"buffers differ: {a!r} vs {b!r}")
        return self.eq(a.shape, b.shape, path + ".shape") and self.eq(a.strides, b.strides, path + ".strides")

    def define(self, a: Any, b: Any, path: str) -> bool:
        if isinstance(a, tuple) and isinstance(b, tuple):
            if len(a) != len(b):
                return self.fail(path, f"lengths differ: {len(a)} vs {len(b)}")
            return all(self.define(x, y, f"{path}[{i}]") for i, (x, y) in enumerate(zip(a, b)))
        if isinstance(a, Var) and isinstance(b, Var):
            return self.var(a, b, path, define=True)
        if isinstance(a, Buffer) and isinstance(b, Buffer):
            return self.buffer(a, b, path, define=True)
        return self.eq(a, b, path)

    def eq(self, a: Any, b: Any, path: str) -> bool:
        if isinstance(a, Var) and isinstance(b, Var) and type(a) is type(b):
            return self.var(a, b, path)
        if isinstance(a, Buffer) or isinstance(b, Buffer):
            if not (isinstance(a, Buffer) and isinstance(b, Buffer)):
                return self.fail(path, f"{_show(a)} vs {_show(b)}")
            return self.buffer(a, b, path)
        if isinstance(a, (Node, BufferRegion)) or isinstance(b, (Node, BufferRegion)):
            if type(a) is not type(b):
                return self.fail(path, f"{type(a).__name__} vs {type(b).__name__}: {_show(a)} vs {_show(b)}")
            defs = DEF_FIELDS.get(type(a).__name__, ())
            for name in node_fields(a):
                x, y = getattr(a, name), getattr(b, name)
                sub = f"{path}.{name}" if path else name
                ok = self.define(x, y, sub) if name in defs else self.eq(x, y, sub)
                if not ok:
                    return False
            return True
        if isinstance(a, DType) or isinstance(b, DType):
            return a == b or self.fail(path, f"dtypes differ: {a} vs {b}")
        if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)) and type(a) is type(b):
            if len(a) != len(b):
                return self.fail(path, f"lengths differ: {len(a)} vs {len(b)}")
            return all(self.eq(x, y, f"{path}[{i}]") for i, (x, y) in enumerate(zip(a, b)))
        if isinstance(a, dict) and isinstance(b, dict):
            return self.dict(a, b, path)
        if isinstance(a, _PRIMITIVE) and isinstance(b, _PRIMITIVE):
            if type(a) is not type(b):
                return self.fail(path, f"{a!r} vs {b!r}")
            if isinstance(a, float) and math.isnan(a) and math.isnan(b):
                return True
            return a == b or self.fail(path, f"{a!r} vs {b!r}")
        if type(a) is not type(b):
            return self.fail(path, f"{type(a).__name__} vs {type(b).__name__}")
        if dataclasses.is_dataclass(a):
            return all(self.eq(getattr(a, f.name), getattr(b, f.name), f"{path}.{f.name}")
                       for f in dataclasses.fields(a))
        try:
            same = a is b or bool(a == b)
        except Exception:
            same = False
        return same or self.fail(path, f"{a!r} vs {b!r}")

    def dict(self, a: dict, b: dict, path: str) -> bool:
        if len(a) != len(b):
            return self.fail(path, f"dict sizes differ: {len(a)} vs {len(b)}")
        if all(isinstance(k, _PRIMITIVE) for k in a):
            for k, v in a.items():
                if k not in b:
                    return self.fail(path, f"key {k!r} missing on the right")
                if not self.eq(v, b[k], f"{path}[{k!r}]"):
                    return False
            return True
        # keys that are buffers or vars: match through the correspondence, else by position
        order_b = list(b.items())
        for i, (k, v) in enumerate(a.items()):
            kb = self.fwd.get(k, order_b[i][0]) if not isinstance(k, _PRIMITIVE) else k
            if kb not in b:
                return self.fail(path, f"key {_show(k)} has no counterpart")
            if not (self.eq(k, kb, f"{path}.key[{i}]") and self.eq(v, b[kb], f"{path}[{_show(k)}]")):
                return False
        return True


def _name(x: Any) -> str:
    return f"var '{x.name}'" if isinstance(x, Var) else f"buffer '{getattr(x, 'name', x)}'"


def _show(x: Any) -> str:
    if isinstance(x, Expr):
        return str(x)
    if isinstance(x, Node):
        text = hooks.script(x).strip()
        return text.splitlines()[0] if text else type(x).__name__
    return repr(x)


def structural_equal(a: Any, b: Any, map_free_vars: bool = True) -> bool:
    """Whether ``a`` and ``b`` (Exprs, Stmts, PrimFuncs, regions) are equal up to renaming.

    With ``map_free_vars=False`` variables and buffers that are not defined inside the trees
    (function parameters count as defined) must be the very same objects.
    """
    return _Equal(map_free_vars).eq(a, b, "")


def assert_structural_equal(a: Any, b: Any, map_free_vars: bool = True) -> None:
    """Raise ``AssertionError`` naming the first differing path and showing both trees."""
    cmp = _Equal(map_free_vars)
    if cmp.eq(a, b, ""):
        return
    script = hooks.script
    raise AssertionError(
        f"structural mismatch at {cmp.path}: {cmp.why}\n"
        f"--- left ---\n{_script(a, script)}\n--- right ---\n{_script(b, script)}")


def _script(x: Any, script: Any) -> str:
    try:
        return script(x) if isinstance(x, Node) else repr(x)
    except Exception as err:  # a broken tree must not hide the mismatch report
        return f"<cannot print {type(x).__name__}: {err}>"


class _Hasher:
    def __init__(self) -> None:
        self.ids: dict[Any, int] = {}
        self.out: list[str] = []

    def number(self, x: Any) -> Optional[int]:
        if x in self.ids:
            return self.ids[x]
        self.ids[x] = len(self.ids)
        return None

    def add(self, x: Any) -> None:
        out = self.out
        if isinstance(x, Var):
            n = self.number(x)
            out.append(f"v{len(self.ids) - 1 if n is None else n}:{x.dtype.name}")
        elif isinstance(x, Buffer):
            n = self.number(x)
            if n is not None:
                out.append(f"b{n}")
                return
            out.append(f"B{x.dtype.name}:{x.scope}")
            self.add(x.shape)
            self.add(x.strides)
        elif isinstance(x, (Node, BufferRegion)):
            out.append("(" + type(x).__name__)
            for name in node_fields(x):
                self.add(getattr(x, name))
            out.append(")")
        elif isinstance(x, DType):
            out.append(x.name)
        elif isinstance(x, (tuple, list)):
            out.append(f"[{len(x)}")
            for v in x:
                self.add(v)
            out.append("]")
        elif isinstance(x, dict):
            out.append(f"{{{len(x)}")
            if all(isinstance(k, _PRIMITIVE) for k in x):
                for k in sorted(x, key=repr):
                    out.append(repr(k))
                    self.add(x[k])
            out.append("}")
        elif isinstance(x, _PRIMITIVE):
            out.append(f"{type(x).__name__}:{x!r}")
        elif dataclasses.is_dataclass(x):
            out.append("(" + type(x).__name__)
            for f in dataclasses.fields(x):
                self.add(getattr(x, f.name))
            out.append(")")
        else:
            out.append(type(x).__name__)


def structural_hash(x: Any) -> int:
    """A 64-bit hash, stable across processes, equal for structurally equal trees."""
    h = _Hasher()
    h.add(x)
    digest = hashlib.blake2b("\x1f".join(h.out).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little")
