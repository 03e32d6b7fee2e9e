"""Warp-specialized blocks on the emulator: the two sides of a branch run as tasks that wait on
each other.

A block's threads normally run in step (:mod:`.stmts`). A branch whose condition differs per
thread and whose sides wait on barriers (``mbarrier`` waits, named barriers: producer and
consumer warpgroups) cannot run one side after the other, since each side waits for the other.
Such a branch *forks*: each side becomes a task with its own lanes (and its own copy of the
environment's slots), the enclosing code waits until both are done, and the tasks take turns:
one runs until it waits on something not yet there, then the next task that can go on runs
(round robin, so runs are deterministic). When no task can go on, that is a deadlock, reported
with every task's wait.

A side whose warpgroups wait for each other (a ``bar.arrive``, or a named barrier whose id differs
per thread: ping-pong of consumer warpgroups) runs as one task per warpgroup
(:func:`stmts._per_warpgroup`); named barriers themselves are :mod:`.named_barriers`.

Warp-specialized regions written one after the other (``with T.ws(1): producer loop`` then
``with T.ws(0): consumer loop``) become one such branch first (:func:`side_by_side`).

Tasks are Python threads of which exactly one runs at a time (the others sleep on a condition
variable), so the closures of :mod:`tegula.backends.closure` run unchanged inside them.
"""
from __future__ import annotations

import dataclasses
import threading
from typing import Any, Callable, Optional

from tegula.errors import SyncError
from tegula.ir.stmt import WARP_SPECIALIZE, AttrStmt, IfThenElse, SeqStmt, Stmt
from tegula.ir.visitor import Mutator


class _Abort(BaseException):
    """Unwinds a task when another task failed."""


class Task:
    def __init__(self, name: str, fn: Optional[Callable] = None, env: Optional[list] = None):
        self.name, self.fn, self.env = name, fn, env
        self.pred: Optional[Callable[[], bool]] = None   # what it waits for (None: it can run)
        self.deadlock: Optional[Callable[[], Exception]] = None
        self.what = ""
        self.done = False
        self.started = False
        self.thread: Optional[threading.Thread] = None
        self.forked = False     # it waits for tasks it forked (their waits say more)


class Scheduler:
    """The tasks of one block; exactly one runs at a time."""

    def __init__(self) -> None:
        self.cv = threading.Condition()
        self.root = Task("the block")
        self.root.started = True
        self.tasks: list[Task] = [self.root]
        self.current = self.root
        self.error: Optional[BaseException] = None

    # -- running ----------------------------------------------------------------------------------
    def fork(self, sides: list) -> None:
        """Run ``sides`` (``(name, fn, env)``) as tasks; return when all of them are done."""
        me = self.current
        kids = [Task(name, fn, env) for name, fn, env in sides]
        self.tasks.extend(kids)
        me.forked = True
        self.block(lambda: all(k.done for k in kids), None,
                   lambda: SyncError("deadlock between the branches of a warp-specialized block"),
                   what=f"{me.name} waits for its branches")
        me.forked = False

    def _start(self, t: Task) -> None:
        def body() -> None:
            with self.cv:
                while self.current is not t and self.error is None:
                    self.cv.wait()
            try:
                if self.error is None:
                    t.fn(t.env)  # type: ignore[misc]
            except _Abort:
                pass
            except BaseException as e:  # noqa: BLE001 (handed to the block's thread)
                self.error = self.error or e
            t.done = True
            with self.cv:
                if self.error is None:
                    self._pass_on(t)
                self.cv.notify_all()
        t.started = True
        t.thread = threading.Thread(target=body, daemon=True)
        t.thread.start()

    def _runnable(self, t: Task) -> bool:
        if t.done:
            return False
        return t.pred is None or bool(t.pred())

    def _pick(self, me: Task) -> Optional[Task]:
        i = self.tasks.index(me)
        order = self.tasks[i + 1:] + self.tasks[:i]
        for t in order:
            if self._runnable(t):
                return t
        return None

    def _pass_on(self, me: Task) -> None:
        """``me`` finished: hand the turn on, or report the deadlock of the tasks left."""
        nxt = self._pick(me)
        if nxt is None:
            waiting = [t for t in self.tasks if not t.done and t.pred is not None]
            inner = sorted((t for t in waiting if t is not self.root and t.deadlock is not None),
                           key=lambda t: t.forked)
            if inner:
                self.error = inner[0].deadlock()  # type: ignore[misc]
            return
        self._switch_to(nxt)

    def _switch_to(self, t: Task) -> None:
        self.current = t
        if not t.started:
            self._start(t)
        self.cv.notify_all()

    def block(self, pred: Callable[[], bool], env: Any, deadlock: Callable[[], Exception],
              what: str = "") -> None:
        """The running task waits until ``pred()``; others run meanwhile."""
        me = self.current
        me.pred, me.deadlock, me.what = pred, deadlock, what
        try:
            with self.cv:
                while not pred():
                    nxt = self._pick(me)
                    if nxt is None:
                        if pred():
                            break
                        if me is self.root:  # name what the branches wait for
                            inner = sorted((t for t in self.tasks if t is not me and not t.done and t.deadlock),
                                           key=lambda t: t.forked)
                            if inner:
                                raise inner[0].deadlock()  # type: ignore[misc]
                        raise deadlock()
                    self._switch_to(nxt)
                    while self.current is not me and self.error is None:
                        self.cv.wait()
                    if self.error is not None:
                        if me is self.root:
                            raise self.error
                        raise _Abort()
        finally:
            me.pred = me.deadlock = None

    def yield_(self, env: Any) -> None:
        """The running task polls (``try_wait`` said no): let another task run first."""
        me = self.current
        with self.cv:
            nxt = self._pick(me)
            if nxt is None:
                return
            self._switch_to(nxt)
            while self.current is not me and self.error is None:
                self.cv.wait()
            if self.error is not None:
                raise self.error if me is self.root else _Abort()

    def describe_waits(self) -> str:
        out = ""
        for t in self.tasks:
            if t is not self.current and not t.done and t.what and t is not self.root:
                out += f"\n  meanwhile {t.name}: {t.what}"
        return out


# -- warp-specialized regions ------------------------------------------------------------------
def side_by_side(body: Stmt) -> Stmt:
    """Warp-specialized regions that follow each other (``with T.ws(i):``, lowered to
    ``AttrStmt(WARP_SPECIALIZE, (first thread, threads, ...), if (its threads) ...)``) on disjoint
    warpgroups, as one ``if / else if`` chain: each thread runs the one region it belongs to either
    way, and the chain's sides run as tasks, side by side as on the GPU. One after the other, a
    producer region's loop would wait for stages that the consumer region after it has not freed yet.
    """
    class M(Mutator):
        def visit_SeqStmt(m, s: SeqStmt) -> Stmt:
            stmts = [m.visit(x) for x in s.stmts]
            out: list = []
            run: list = []
            for x in stmts + [None]:
                r = _region(x)
                if r is not None and all(_disjoint(r, y) for y in run):
                    run.append(x)
                    continue
                out.extend(run if len(run) < 2 else [_chain(run)])
                run = [x] if r is not None else []
                if r is None and x is not None:
                    out.append(x)
            return dataclasses.replace(s, stmts=tuple(out))
    return M().visit(body)


def _region(s: Any) -> Optional[tuple]:
    """(first thread, threads) of a lowered region whose branch has no else."""
    if (isinstance(s, AttrStmt) and s.key == WARP_SPECIALIZE and isinstance(s.body, IfThenElse)
            and s.body.else_ is None and len(s.value) >= 2):
        return int(s.value[0]), int(s.value[1])
    return None


def _disjoint(r: tuple, other: Any) -> bool:
    lo, n = _region(other)
    return r[0] + r[1] <= lo or lo + n <= r[0]


def _chain(run: list) -> Stmt:
    out = None
    for a in reversed(run):
        out = dataclasses.replace(a, body=dataclasses.replace(a.body, else_=out))
    return out
