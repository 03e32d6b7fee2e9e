"""The cross-core part of InsertSync: flags for hand-offs through GM between the cube core and the
vector cores of one AI core group.

A kernel's ``T.Scope`` blocks run one after another in the interpreter (the meaning of the
kernel), but the AIC and the two AIVs run at once on the machine. Where a later scope of the
other core kind touches GM bytes an earlier one wrote (or writes bytes it read), the earlier
scope sets a cross-core flag after its last statement touching them, on the pipe that touched
them, and the later scope waits before its first such statement:

- cube -> vectors: ``set_cross_flag(pipe, id, mode=2)`` counts one on each AIV, and each AIV's
  ``wait_cross_flag(id)`` takes one;
- vectors -> cube: each AIV sets (mode 2) and the AIC's wait takes one set of each.

One flag per (earlier scope, later scope, pipe), less those implied by a chain through a scope
between, ids from 0 up to the machine's cross-core flag count. A kernel that writes any cross-core flag by hand keeps its own and gets none.

Before::

    with T.Scope("C"):
        ...
        T.copy(C_l0, W[cid, 0, 0])                 # FIX writes the workspace
    with T.Scope("V"):
        T.copy(W[cid, vid * 32, 0], c_ub)          # MTE2 reads it

After::

    with T.Scope("C"):
        ...
        T.copy(C_l0, W[cid, 0, 0])
        T.set_cross_flag("fix", 0, mode=2)  # inserted
    with T.Scope("V"):
        T.wait_cross_flag(0)  # inserted
        T.copy(W[cid, vid * 32, 0], c_ub)
"""
from __future__ import annotations

import dataclasses
from typing import Any

from tegula.errors import ResourceError
from tegula.ir.expr import const
from tegula.ir.npu import CoreScope, NpuKernel, SetCrossFlag, WaitCrossFlag
from tegula.ir.stmt import For, SeqStmt, Stmt, TileOp, seq
from tegula.ir.visitor import post_order_visit


def _flat(s: Stmt) -> list:
    if isinstance(s, SeqStmt):
        return [x for y in s.stmts for x in _flat(y)]
    return [s]


def _gm_accesses(s: Stmt, m: Any) -> list:
    """(region, writes, pipe) of every GM access of the tile operations in ``s``."""
    from tegula.backends.npu.access import pipe_of, region_accesses

    out: list = []

    def visit(n: Any) -> None:
        if isinstance(n, TileOp) or (isinstance(n, For) and n.kind == "parallel"):
            out.extend((r, w, pipe_of(n, m)) for r, w in region_accesses(n)
                       if r.buffer.scope == "global")
    post_order_visit(s, visit)
    return out


def has_hand_cross_flags(k: NpuKernel) -> bool:
    found: list = []
    post_order_visit(k.body, lambda n: found.append(1) if isinstance(n, (SetCrossFlag, WaitCrossFlag))
                     and not n.auto else None)
    return bool(found)


def cross_core_flags(k: NpuKernel, m: Any) -> Stmt:
    """``k``'s body with the cross-core flags its hand-offs through GM need (see the module
    docstring)."""
    from tegula.backends.npu.access import disjoint_regions

    if has_hand_cross_flags(k):
        return k.body
    top = _flat(k.body)
    scopes = [i for i, s in enumerate(top) if isinstance(s, CoreScope)]
    if len({top[i].kind for i in scopes}) < 2:
        return k.body
    lets = {s.var: s.value for s in top if type(s).__name__ == "LetStmt"}
    stmts = {i: _flat(top[i].body) for i in scopes}
    acc = {i: [_gm_accesses(s, m) for s in stmts[i]] for i in scopes}
    edges: dict = {}   # (earlier scope, later scope, pipe) -> [last statement, first statement]
    for x, i in enumerate(scopes):
        for j in scopes[x + 1:]:
            if top[i].kind == top[j].kind:
                continue
            for a, ea in enumerate(acc[i]):
                for c, ec in enumerate(acc[j]):
                    for r1, w1, p1 in ea:
                        if any(r2.buffer is r1.buffer and (w1 or w2) and
                               not disjoint_regions(r1, r2, lets) for r2, w2, _ in ec):
                            e = edges.setdefault((i, j, p1), [a, c])
                            e[0], e[1] = max(e[0], a), min(e[1], c)
    # an edge i -> k is implied by i -> j -> k when the i -> j set (same pipe) comes no earlier,
    # j's wait for it comes before its set for k, and k waits for j no later
    for (i, kk, p), (a, c) in list(edges.items()):
        if any(i < j < kk and (i, j, p) in edges and edges[(i, j, p)][0] >= a and
               any(jj == j and k2 == kk and edges[(i, j, p)][1] <= a2 and c2 <= c
                   for (jj, k2, _), (a2, c2) in edges.items())
               for j in scopes):
            del edges[(i, kk, p)]
    if not edges:
        return k.body
    if len(edges) > m.cross_flag_ids:
        raise ResourceError(f"the kernel's hand-offs between the cube and the vector cores need "
                            f"{len(edges)} cross-core flags; {m.name} has {m.cross_flag_ids}", k.span,
                            hint="hand the tiles over through fewer workspaces, or write the flags by hand")
    after: dict = {}
    before: dict = {}
    for fid, ((i, j, pipe), (a, c)) in enumerate(sorted(edges.items())):
        after.setdefault((i, a), []).append(SetCrossFlag(pipe, const(fid), 2, auto=True))
        before.setdefault((j, c), []).append(WaitCrossFlag(const(fid), auto=True))
    new = list(top)
    for i in scopes:
        body: list = []
        for n, s in enumerate(stmts[i]):
            body += before.get((i, n), []) + [s] + after.get((i, n), [])
        new[i] = dataclasses.replace(top[i], body=seq(body))
    return seq(new)
