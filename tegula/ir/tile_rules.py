"""One registry of what each tile operation means, keyed by IR node class.

A tile operation (a :class:`~tegula.ir.stmt.TileOp` subclass) has one rule per *aspect*, each
registered with :func:`tile_rule` next to the code of that aspect for that op:

=============  ==========================================  ==========================================
aspect         registered in                               rule
=============  ==========================================  ==========================================
``check``      ``language/semantic.py``                    user operands -> the node (shapes, scopes,
                                                           dtypes checked; typed errors)
``print``      ``ir/printer.py``                           ``(printer, node) -> str``: its T-script line
``cpu``        ``backends/interp/tileops.py``              ``(node, ctx) -> closure``: the interpreter
``layout``     ``backends/cuda/passes/layout_inference.py``  ``(node, plan) -> bool``: its layout
                                                           constraints (``strict`` ones apart)
``cuda``       ``backends/cuda/passes/lower_*.py``         ``(ctx, node) -> Stmt``: per-thread code
``cuda.lane``  ``backends/cuda/passes/lower_*.py``         the same, inside a ``T.Parallel`` body
``npu``        ``backends/npu/``                           the NPU lowering (a slot for now)
``effects``    ``ir/effects.py``, ``ir/npu.py``            ``node -> Effects``: what it reads and
                                                           writes, its unit, async or atomic
``npu.*``      ``backends/npu/``                           added by the NPU backend (:func:`add_aspect`):
                                                           ``npu.emu`` the emulator's instruction,
                                                           ``npu.cost`` its cost, ``npu.pto`` /
                                                           ``npu.ascendc`` its printed lines
=============  ==========================================  ==========================================

The set of aspects is open: a target adds its own with :func:`add_aspect`.

The emulator (``cuda-emu``) runs the CUDA lowering's output, so no tile op needs a rule of its
own there. A rule that a target needs and nobody registered is one
:class:`~tegula.errors.MissingRuleError` naming the op and the target (:meth:`TileRules.require`).

How reductions and scans combine elements is a table of its own (:mod:`tegula.ir.combiners`):
a new ``T.reduce_<kind>`` is a row there.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Optional

from tegula.errors import MissingRuleError

ASPECTS = ["check", "print", "cpu", "layout", "layout.strict", "cuda", "cuda.lane", "npu", "effects"]
# the aspects that are a target's way of running an op, and the target each names in errors
TARGET_OF = {"cpu": "cpu", "cuda": "cuda", "cuda.lane": "cuda", "npu": "npu"}


def add_aspect(aspect: str, target: Optional[str] = None) -> str:
    """Make ``aspect`` a rule kind (the kinds are an open set: a target adds its own, as the NPU
    backend adds ``npu.pto``, ``npu.ascendc``, ``npu.emu``, ``npu.cost``); ``target`` is what a
    missing rule of this kind names. Adding a known aspect again changes nothing. Returns it."""
    if aspect not in ASPECTS:
        ASPECTS.append(aspect)
    if target is not None:
        TARGET_OF.setdefault(aspect, target)
    return aspect

Rule = Callable[..., Any]


def op_name(node_or_cls: Any) -> str:
    """The user-facing name of a tile op (``T.copy``, ``T.reduce_max``, ...)."""
    name = getattr(node_or_cls, "op_name", None)
    if isinstance(name, str):
        return name
    cls = node_or_cls if isinstance(node_or_cls, type) else type(node_or_cls)
    return "T." + re.sub(r"(?<!^)(?=[A-Z])", "_", cls.__name__).lower()


class TileRules:
    """Rules keyed by ``(node class, aspect)``; a subclass without its own rule uses its base's."""

    def __init__(self) -> None:
        self._rules: dict[tuple[type, str], Rule] = {}

    def register(self, cls: type, aspect: str) -> Callable[[Rule], Rule]:
        """Decorator: ``fn`` is ``cls``'s rule for ``aspect`` (replacing an earlier one)."""
        if aspect not in ASPECTS:
            raise ValueError(f"unknown tile-op aspect {aspect!r}; known: {', '.join(ASPECTS)}")

        def deco(fn: Rule) -> Rule:
            self._rules[(cls, aspect)] = fn
            return fn
        return deco

    def get(self, cls: type, aspect: str) -> Optional[Rule]:
        """The rule of ``cls`` (or its nearest base) for ``aspect``, or None."""
        for c in cls.__mro__:
            fn = self._rules.get((c, aspect))
            if fn is not None:
                return fn
        return None

    def require(self, node: Any, aspect: str, target: Optional[str] = None,
                hint: str = "") -> Rule:
        """The rule of ``node``'s class (or of the class ``node``) for ``aspect``; raises
        :class:`MissingRuleError` (with ``node``'s span) naming the op and the target when
        there is none."""
        fn = self.get(node if isinstance(node, type) else type(node), aspect)
        if fn is None:
            raise missing_rule(node, target or TARGET_OF.get(aspect, aspect), aspect, hint)
        return fn

    def each(self, nodes: Any, aspect: str) -> list[tuple[Any, Rule]]:
        """``(node, rule)`` for the nodes with a rule for ``aspect``: rule by rule in the order
        they were registered, nodes in their given order within one rule."""
        keys = list(self._rules)
        found = []
        for pos, n in enumerate(nodes):
            for c in type(n).__mro__:
                if (c, aspect) in self._rules:
                    found.append((keys.index((c, aspect)), pos, n, self._rules[(c, aspect)]))
                    break
        return [(n, fn) for _, _, n, fn in sorted(found, key=lambda x: (x[0], x[1]))]

    def ops(self) -> dict[type, list[str]]:
        """Every class with a rule, and its aspects (for documentation and tests)."""
        out: dict[type, list[str]] = {}
        for cls, aspect in self._rules:
            out.setdefault(cls, []).append(aspect)
        return out


def missing_rule(node: Any, target: str, aspect: str = "", hint: str = "") -> MissingRuleError:
    """The error for ``node`` having no rule on ``target``."""
    cls = node if isinstance(node, type) else type(node)
    what = f"no {aspect} rule is registered for {cls.__name__}" if aspect else ""
    full = "; ".join(h for h in (hint, what) if h)
    span = None if isinstance(node, type) else getattr(node, "span", None)
    return MissingRuleError(f"unimplemented op {op_name(node)} for target {target}", span,
                            hint=full or None)


TILE_RULES = TileRules()
tile_rule = TILE_RULES.register
