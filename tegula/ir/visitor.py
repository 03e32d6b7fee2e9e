"""Walking and rewriting IR trees.

:class:`Visitor` visits every node of an expression, statement or function; :class:`Mutator`
rebuilds a tree, creating new nodes only along paths where a child changed. Both dispatch on the
node's class name: a method ``visit_<ClassName>`` handles that class (found along the class's
MRO, so ``visit_TileOp`` sees every tile operation); everything else goes to ``generic_visit``,
which walks the dataclass fields, including tuples and dicts of nodes, ``BufferRegion`` ranges and
``Buffer`` shapes.

Variables and buffers in *defining* positions (loop variables, block variables, let-bound
variables, function parameters, kernel allocations) go through ``visit_def`` so a subclass can
tell definitions from uses::

    class CountLoads(Visitor):
        def __init__(self):
            self.n = 0
        def visit_BufferLoad(self, node):
            self.n += 1
            self.generic_visit(node)
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterable, Mapping, Optional, Union

from tegula.ir.buffer import Buffer, BufferRegion
from tegula.ir.expr import Expr, Node, Var, as_expr

# Fields holding variables or buffers that a node defines (rather than uses).
DEF_FIELDS: dict[str, tuple[str, ...]] = {
    "For": ("var",),
    "LetStmt": ("var",),
    "Kernel": ("block_vars", "thread_var", "allocs"),
    "PrimFunc": ("params",),
}

_FIELDS_CACHE: dict[type, tuple[str, ...]] = {}


def node_fields(node: Any) -> tuple[str, ...]:
    """Names of the dataclass fields of ``node`` that can hold children (``span`` excluded)."""
    cls = type(node)
    names = _FIELDS_CACHE.get(cls)
    if names is None:
        names = tuple(f.name for f in dataclasses.fields(cls) if f.name != "span")
        _FIELDS_CACHE[cls] = names
    return names


def _is_child(v: Any) -> bool:
    return isinstance(v, (Node, Buffer, BufferRegion))


class _Dispatch:
    """Dispatch by class name along the MRO, cached per (visitor class, node class)."""

    _cache: dict[tuple[type, type], Optional[str]] = {}

    def _method(self, node: Any) -> Optional[Callable[[Any], Any]]:
        key = (type(self), type(node))
        name = _Dispatch._cache.get(key, "")
        if name == "":
            name = None
            for cls in type(node).__mro__:
                cand = "visit_" + cls.__name__
                if hasattr(self, cand):
                    name = cand
                    break
            _Dispatch._cache[key] = name
        return getattr(self, name) if name is not None else None


class Visitor(_Dispatch):
    """Visits every node; override ``visit_<ClassName>`` and call ``generic_visit`` to recurse."""

    def visit(self, node: Any) -> None:
        """Visit one node (Expr, Stmt, PrimFunc, Buffer or BufferRegion)."""
        method = self._method(node)
        if method is not None:
            method(node)
        else:
            self.generic_visit(node)

    def visit_def(self, node: Union[Var, Buffer]) -> None:
        """A variable or buffer in a defining position; by default visited like any node."""
        self.visit(node)

    def visit_Buffer(self, buf: Buffer) -> None:
        for d in buf.shape:
            if isinstance(d, Expr):
                self.visit(d)
        for s in buf.strides or ():
            if isinstance(s, Expr):
                self.visit(s)

    def generic_visit(self, node: Any) -> None:
        """Visit the children of ``node`` in field order."""
        if isinstance(node, Buffer):
            Visitor.visit_Buffer(self, node)
            return
        defs = DEF_FIELDS.get(type(node).__name__, ())
        for name in node_fields(node):
            value = getattr(node, name)
            if name in defs:
                for d in value if isinstance(value, tuple) else (value,):
                    if d is not None:
                        self.visit_def(d)
            else:
                self._walk(value)

    def _walk(self, value: Any) -> None:
        if _is_child(value):
            self.visit(value)
        elif isinstance(value, (tuple, list)):
            for v in value:
                self._walk(v)
        elif isinstance(value, dict):
            for k, v in value.items():
                self._walk(k)
                self._walk(v)


class Mutator(_Dispatch):
    """Rebuilds a tree; override ``visit_<ClassName>`` returning the replacement node.

    Unchanged subtrees are returned as the same objects. New nodes are made with
    ``dataclasses.replace``, which keeps their spans. Buffers are shared identities and are not
    rebuilt; ``buffer_map`` (or an override of ``visit_Buffer``) swaps one buffer for another
    everywhere it appears.
    """

    def __init__(self, buffer_map: Optional[Mapping[Buffer, Buffer]] = None):
        self.buffer_map: dict[Buffer, Buffer] = dict(buffer_map or {})

    def visit(self, node: Any) -> Any:
        method = self._method(node)
        if method is not None:
            return method(node)
        return self.generic_visit(node)

    def visit_def(self, node: Union[Var, Buffer]) -> Union[Var, Buffer]:
        """A defining variable or buffer: renamed only when the mutator maps it to a Var/Buffer."""
        new = self.visit(node)
        if isinstance(node, Var):
            return new if isinstance(new, Var) else node
        return new if isinstance(new, Buffer) else node

    def visit_Buffer(self, buf: Buffer) -> Buffer:
        return self.buffer_map.get(buf, buf)

    def visit_Var(self, var: Var) -> Expr:
        return var

    def generic_visit(self, node: Any) -> Any:
        """Mutate the children of ``node``; a new node only if one of them changed."""
        if isinstance(node, Buffer):
            return node
        defs = DEF_FIELDS.get(type(node).__name__, ())
        changes: dict[str, Any] = {}
        for name in node_fields(node):
            value = getattr(node, name)
            if name in defs:
                if isinstance(value, tuple):
                    new = tuple(self.visit_def(d) for d in value)
                    if any(a is not b for a, b in zip(new, value)):
                        changes[name] = new
                elif value is not None:
                    new = self.visit_def(value)
                    if new is not value:
                        changes[name] = new
            else:
                new = self._walk(value)
                if new is not value:
                    changes[name] = new
        if not changes:
            return node
        return dataclasses.replace(node, **changes)

    def _walk(self, value: Any) -> Any:
        if _is_child(value):
            return self.visit(value)
        if isinstance(value, (tuple, list)):
            new = [self._walk(v) for v in value]
            if all(a is b for a, b in zip(new, value)):
                return value
            return type(value)(new)
        if isinstance(value, dict):
            items = [(self._walk(k), self._walk(v)) for k, v in value.items()]
            if all(nk is k and nv is v for (nk, nv), (k, v) in zip(items, value.items())):
                return value
            return dict(items)
        return value


class _PostOrder(Visitor):
    def __init__(self, fn: Callable[[Any], None]):
        self.fn = fn

    def visit(self, node: Any) -> None:
        self.generic_visit(node)
        self.fn(node)


def post_order_visit(node: Any, fn: Callable[[Any], None]) -> None:
    """Call ``fn`` on every node under ``node`` (itself included), children first.

    ``fn`` also sees ``Buffer`` and ``BufferRegion`` objects, once per reference.
    """
    _PostOrder(fn).visit(node)


class _Substitute(Mutator):
    def __init__(self, vmap: Mapping[Var, Expr]):
        super().__init__()
        self.vmap = vmap

    def visit_Var(self, var: Var) -> Expr:
        return self.vmap.get(var, var)


def substitute(node: Any, vmap: Mapping[Var, Any]) -> Any:
    """Replace variables by expressions in ``node`` (Expr, Stmt, PrimFunc or BufferRegion).

    Values may be Python numbers. Buffer shapes are left alone: buffers are shared identities.
    A defining occurrence (a loop variable, say) is replaced only when mapped to another Var.
    """
    if not vmap:
        return node
    exprs = {k: as_expr(v, like=k.dtype) for k, v in vmap.items()}
    return _Substitute(exprs).visit(node)


class _CollectVars(Visitor):
    def __init__(self) -> None:
        self.seen: dict[Var, None] = {}

    def visit_Var(self, var: Var) -> None:
        self.seen.setdefault(var, None)


def collect_vars(node: Any) -> list[Var]:
    """Every distinct Var under ``node`` (uses, definitions, buffer shapes), in order of appearance."""
    c = _CollectVars()
    c.visit(node)
    return list(c.seen)


class _UsesVar(Visitor):
    def __init__(self, targets: set[Var]):
        self.targets = targets
        self.found = False

    def visit(self, node: Any) -> None:
        if not self.found:
            super().visit(node)

    def visit_Var(self, var: Var) -> None:
        if var in self.targets:
            self.found = True


def uses_var(node: Any, var: Union[Var, Iterable[Var]]) -> bool:
    """Whether ``node`` mentions ``var`` (or any of several variables) anywhere."""
    targets = {var} if isinstance(var, Var) else set(var)
    v = _UsesVar(targets)
    v.visit(node)
    return v.found
