"""The pipes of one block's cores, advanced in an adversarial order, with the sync checks.

Each core's instruction stream (from :mod:`.trace`) is dispatched in program order by its scalar
unit into one in-order queue per pipe. At every step the simulator picks, at random (seeded),
one enabled action among all cores:

- dispatch the next instruction of a core (``barrier_all`` waits for the core's queues to drain,
  ``wait_cross_flag`` for a count, and both stall the dispatch of what follows);
- execute the head of a pipe's queue (``wait_flag`` only once its flag is set; MTE1/2/3 and FIX may
  execute any of the leading operations before the next flag or barrier, since those pipes do not
  keep the order of overlapping accesses).

So nothing orders two pipes but flags, barriers and issue order, and a missing flag changes what
the kernel computes. Happens-before is tracked with vector clocks (one per pipe of each core,
joined through flags, barriers and the issue order of the scalar unit); every access is checked
against earlier ones to the same bytes. Reports name the buffer, the bytes, both pipes and cores,
and both kernel lines: races, deadlocks (nothing can run and some core is not done), a flag set
twice before its wait, flags still pending at the end. Two cores writing the same GM bytes with
no order between them is a race only when the values differ (the hardware's result does not
depend on the order of identical writes; TileLang-Ascend's developer-mode kernels run their vector
code on both vector cores and rely on it); ``strict`` reports those too.
"""
from __future__ import annotations

import random
from typing import Any, Optional

import numpy as np

from tegula.errors import SyncError
from tegula.ir.npu import BARRIER_PIPES, PIPES

CORE_NAMES = ("AIC", "AIV0", "AIV1")


def cross_targets(c: int, ins: Any) -> list:
    """The counters (core, flag, from) a cross-core set of core ``c`` increments."""
    if c == 0:
        return [(1, ins.flag, 0), (2, ins.flag, 0)]
    return [(0, ins.flag, c - 1)] if ins.mode == 2 else [(3 - c, ins.flag, 0)]


def cross_keys(c: int, flag: int) -> list:
    """The counters a cross-core wait of core ``c`` takes one from (the AIC: one of each AIV)."""
    return [(0, flag, 0), (0, flag, 1)] if c == 0 else [(c, flag, 0)]


def _join(a: dict, b: Optional[dict]) -> None:
    if b:
        for k, v in b.items():
            if a.get(k, 0) < v:
                a[k] = v


class Report:
    """What the checks found in one run (deduplicated by kind, buffer and lines)."""

    def __init__(self) -> None:
        self.items: list[str] = []
        self._seen: set = set()

    def add(self, key: tuple, msg: str) -> None:
        if key not in self._seen:
            self._seen.add(key)
            self.items.append(msg)


class Block:
    """One block: three cores' streams, their queues, clocks, flags and shadow memory."""

    def __init__(self, streams: list, machine: Any, report: Report, seed: int, block: int,
                 gm: Optional[dict] = None, strict: bool = False):
        self.streams = streams
        # GM bytes by buffer name: two cores writing the same bytes with the same values is no
        # race (as on the hardware: the result does not depend on their order) unless ``strict``
        self.gm = gm or {}
        self.strict = strict
        self.m = machine
        self.report = report
        self.rng = random.Random(seed * 1000003 + block)
        self.block = block
        n = len(streams)
        self.ptr = [0] * n
        self.queues = [{p: [] for p in PIPES} for _ in range(n)]
        self.clock = {(c, p): {} for c in range(n) for p in PIPES}
        self.window = {(c, p): [] for c in range(n) for p in BARRIER_PIPES}
        self.flags: dict = {}        # (core, src, dst, id) -> (clock, set instr)
        self.cross: dict = {}        # (core, flag, from) -> [(clock, instr)]
        self.shadow: dict = {}       # memory key -> [(lo, hi, write, thread, epoch, instr, core)]

    # -- the actions -------------------------------------------------------------------------
    def enabled(self) -> list:
        acts = []
        for c, stream in enumerate(self.streams):
            if self.ptr[c] < len(stream):
                ins = stream[self.ptr[c]]
                if ins.kind == "all":
                    if not any(self.queues[c].values()):
                        acts.append(("d", c))
                elif ins.kind == "xwait":
                    if all(self.cross.get(k) for k in self._xkeys(c, ins.flag)):
                        acts.append(("d", c))
                elif ins.kind == "wait" and ins.pipe == "S":  # the scalar unit itself waits
                    if (c,) + ins.event + (ins.flag,) in self.flags:
                        acts.append(("d", c))
                else:
                    acts.append(("d", c))
            for p, q in self.queues[c].items():
                if not q:
                    continue
                if p in BARRIER_PIPES and q[0].kind == "op":
                    n = 0
                    while n < len(q) and q[n].kind == "op":
                        acts.append(("x", c, p, n))
                        n += 1
                elif q[0].kind != "wait" or (c,) + q[0].event + (q[0].flag,) in self.flags:
                    acts.append(("x", c, p, 0))
        return acts

    def run(self) -> None:
        while True:
            acts = self.enabled()
            if not acts:
                break
            a = acts[self.rng.randrange(len(acts))]
            if a[0] == "d":
                self.dispatch(a[1])
            else:
                self.execute(a[1], a[2], a[3])
        if any(self.ptr[c] < len(s) or any(self.queues[c].values())
               for c, s in enumerate(self.streams)):
            raise SyncError(self.deadlock())
        for (c, src, dst, fid), (_, ins) in self.flags.items():
            self.report.add(("pending", ins.where()),
                            f"flag misuse: {src}_{dst} id {fid} on {CORE_NAMES[c]} is set at "
                            f"{ins.where()} and never waited for")
        for (c, flag, _), left in self.cross.items():
            if left:
                self.report.add(("xpending", flag, c),
                                f"flag misuse: cross-core flag {flag} still has {len(left)} set(s) "
                                f"pending on {CORE_NAMES[c]} at the end (set at {left[0][1].where()})")

    def deadlock(self) -> str:
        parts = []
        for c, s in enumerate(self.streams):
            if self.ptr[c] < len(s) and s[self.ptr[c]].kind in ("xwait", "all"):
                ins = s[self.ptr[c]]
                what = f"cross-core flag {ins.flag}" if ins.kind == "xwait" else "its pipes to drain"
                parts.append(f"{CORE_NAMES[c]} waits for {what} at {ins.where()}")
            for p, q in self.queues[c].items():
                if q and q[0].kind == "wait":
                    ev = "_".join(q[0].event)
                    parts.append(f"{CORE_NAMES[c]} pipe {p} waits for flag {ev} id {q[0].flag} at "
                                 f"{q[0].where()}, which no earlier set_flag provides")
        return "deadlock in block %d: " % self.block + "; ".join(parts)

    def dispatch(self, c: int) -> None:
        ins = self.streams[c][self.ptr[c]]
        self.ptr[c] += 1
        s_clock = self.clock[(c, "S")]
        if ins.kind == "all":
            for p in PIPES:
                _join(s_clock, self.clock[(c, p)])
            for p in BARRIER_PIPES:
                self.window[(c, p)] = []
            return
        if ins.kind == "xwait":
            for k in self._xkeys(c, ins.flag):
                clock, _ = self.cross[k].pop(0)
                _join(s_clock, clock)
            return
        s_clock[(c, "S")] = s_clock.get((c, "S"), 0) + 1
        ins.issue_clock = dict(s_clock)
        if ins.pipe == "S" and ins.kind in ("op", "set", "wait"):  # the scalar unit's own: done now
            if ins.kind == "op":
                self._run(c, "S", ins, s_clock)
            elif ins.kind == "set":
                self.execute_sync(c, "S", ins, s_clock)
            else:
                flag_clock, _ = self.flags.pop((c,) + ins.event + (ins.flag,))
                _join(s_clock, flag_clock)
            return
        self.queues[c][ins.pipe].append(ins)

    def execute(self, c: int, p: str, n: int) -> None:
        ins = self.queues[c][p].pop(n)
        t = (c, p)
        clock = self.clock[t]
        _join(clock, ins.issue_clock)
        clock[t] = clock.get(t, 0) + 1
        if ins.kind == "op":
            self._run(c, p, ins, clock)
        elif ins.kind == "set":
            self.execute_sync(c, p, ins, clock)
        elif ins.kind == "wait":
            flag_clock, _ = self.flags.pop((c,) + ins.event + (ins.flag,))
            _join(clock, flag_clock)
            self.window_reset(c, p)
        elif ins.kind == "barrier":
            self.window_reset(c, p)
        elif ins.kind == "xset":
            targets = self._xtargets(c, ins)
            for k in targets:
                q = self.cross.setdefault(k, [])
                q.append((dict(clock), ins))
                if len(q) > self.m.cross_flag_max_pending:
                    self.report.add(("xmany", ins.where()),
                                    f"flag misuse: cross-core flag {ins.flag} has more than "
                                    f"{self.m.cross_flag_max_pending} sets pending ({ins.where()})")
            self.window_reset(c, p)

    def execute_sync(self, c: int, p: str, ins: Any, clock: dict) -> None:
        """A ``set_flag`` on pipe ``p``: the flag fires with ``clock``."""
        key = (c,) + ins.event + (ins.flag,)
        if key in self.flags:
            self.report.add(("twice", ins.where()),
                            f"flag misuse: {'_'.join(ins.event)} id {ins.flag} on {CORE_NAMES[c]} "
                            f"is set again at {ins.where()} before a wait consumed the set at "
                            f"{self.flags[key][1].where()}")
        self.flags[key] = (dict(clock), ins)
        self.window_reset(c, p)

    def _run(self, c: int, p: str, ins: Any, clock: dict) -> None:
        deferred = self.check(c, p, ins, clock)
        ins.run()
        for (key, lo, hi, before), args in deferred:
            if not np.array_equal(before, self.gm[key[1]][lo:hi]):
                self.race(*args)

    def window_reset(self, c: int, p: str) -> None:
        if p in BARRIER_PIPES:
            self.window[(c, p)] = []

    # -- cross-core flags (the counting rules of the interpreter) -------------------------------
    def _xtargets(self, c: int, ins: Any) -> list:
        return cross_targets(c, ins)

    def _xkeys(self, c: int, flag: int) -> list:
        return cross_keys(c, flag)

    # -- races ----------------------------------------------------------------------------------
    def check(self, c: int, p: str, ins: Any, clock: dict) -> list:
        """Check ``ins``'s accesses against earlier ones; returns the write-after-write overlaps
        with another core on GM whose verdict waits for the bytes ``ins`` writes (a race only
        when they differ from what is there), each with the bytes before it runs."""
        t = (c, p)
        deferred: list = []
        epoch = clock[t]
        acc = [(k, lo, hi, name, False) for k, lo, hi, name in ins.reads] + \
              [(k, lo, hi, name, True) for k, lo, hi, name in ins.writes]
        win = self.window.get(t)
        for key, lo, hi, name, write in acc:
            if hi <= lo:
                continue
            recs = self.shadow.setdefault(key, [])
            for (rlo, rhi, rw, rt, rep, rins, rc) in recs:
                if rhi <= lo or hi <= rlo or not (rw or write) or rins is ins:
                    continue
                if rep <= clock.get(rt, 0):
                    continue
                args = (key, name, max(lo, rlo), min(hi, rhi), rins, rt, rw, ins, t, write)
                if rw and write and rc != c and key[0] == "GM" and key[1] in self.gm and not self.strict:
                    deferred.append(((key, args[2], args[3], self.gm[key[1]][args[2]:args[3]].copy()), args))
                    continue
                self.race(*args)
            if win is not None:
                for (wk, wlo, whi, ww, wins) in win:
                    if wk == key and not (whi <= lo or hi <= wlo) and (ww or write) and wins is not ins:
                        self.race(key, name, max(lo, wlo), min(hi, whi), wins, t, ww, ins, t, write,
                                  same_pipe=True)
                win.append((key, lo, hi, write, ins))
            if write:  # a write supersedes the records it covers that happen before it
                recs[:] = [r for r in recs if not (lo <= r[0] and r[1] <= hi and r[4] <= clock.get(r[3], 0))]
            recs.append((lo, hi, write, t, epoch, ins, c))
        return deferred

    def race(self, key: tuple, name: str, lo: int, hi: int, a: Any, ta: tuple, aw: bool, b: Any,
             tb: tuple, bw: bool, same_pipe: bool = False) -> None:
        mem = "GM" if key[0] == "GM" else key[1].upper()
        kinds = {(True, True): "write after write", (True, False): "read after write",
                 (False, True): "write after read"}[(aw, bw)]
        why = f"nothing orders them on pipe {tb[1]} (needs T.pipe_barrier(\"{tb[1].lower()}\"))" \
            if same_pipe else "no flag or barrier orders them"
        self.report.add(("race", name, a.where(), b.where()),
                        f"race ({kinds}) on {mem} buffer '{name}' bytes [{lo}, {hi}) in block "
                        f"{self.block}: {CORE_NAMES[ta[0]]} {ta[1]} {'writes' if aw else 'reads'} at "
                        f"{a.where()} ({a.what()}) and {CORE_NAMES[tb[0]]} {tb[1]} "
                        f"{'writes' if bw else 'reads'} at {b.where()} ({b.what()}); {why}")
