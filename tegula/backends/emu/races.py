"""Shared-memory race and initialization tracking for one thread block.

The shared pool is cut into *units* of the smallest element size among the kernel's shared
buffers (so an element covers one or more whole units, and aliased buffers share units). Per
unit the tracker keeps the last writer, its clock, site and the buffer written, and up to two
readers not ordered before each other; reads by further readers that neither of the two is
ordered after (threads reading one element all at once, of which only some release it) go to a
log of their own, which a write checks too and a ``__syncthreads()`` empties. Who is ordered after whom is a vector clock per agent
(the block's threads, and the asynchronous units acting for them: the copy engine of each
mbarrier, the wgmma of each warpgroup, TMA stores): ``__syncthreads()`` orders every thread
after everything any thread saw, named barriers order their threads, an mbarrier phase orders
its waiters after its arrivals and the bytes the copy engine delivered on it, ``wait_group``
orders a warpgroup after its retired wgmma. Two accesses of the same unit conflict when at
least one writes and neither is ordered after the other: read-after-write, write-after-read and
write-after-write (with sharper names when an agent is involved: a TMA destination read before
its phase completes, a stage the copy engine refills before its consumer released it, a wgmma
operand overwritten while the wgmma may read it). A read of a unit never written (or last written
through another buffer that shares its bytes) is an uninitialized read. cp.async and TMA writes
count when they land; until then any access of their units is reported too. The async proxy
(:meth:`Tracker.async_read`) also needs generic writes fenced (``fence.proxy.async``).
"""
from __future__ import annotations

import warnings
from typing import Any, Optional

import numpy as np

from tegula.errors import OutOfBoundsError, RaceError, TegulaError
from tegula.backends.emu.context import BufInfo, Site


LOG_ROOM = 4096  # logged reads kept before they are compacted to one per unit and reader


class RaceWarning(UserWarning):
    """A race or memory error found by the emulator while races are reported as warnings."""


class Reporter:
    """Raises findings, or warns once per distinct finding when ``as_warnings``."""

    def __init__(self, as_warnings: bool):
        self.as_warnings = as_warnings
        self.seen: set = set()
        self.block = ""

    def report(self, err: TegulaError, key: tuple) -> None:
        if not self.as_warnings:
            raise err
        if key in self.seen:
            return
        self.seen.add(key)
        warnings.warn(str(err), RaceWarning, stacklevel=2)

    def oob(self, msg: str, span, key: tuple) -> None:
        self.report(OutOfBoundsError(f"{msg} ({self.block})", span), ("oob",) + key)


def _idx(buf: BufInfo, unit: int, unit_size: int) -> int:
    """The element of ``buf`` that holds byte ``unit * unit_size`` of the pool."""
    return (unit * unit_size - buf.offset) // buf.itemsize


def _elem(site_buf: Optional[BufInfo], unit: int, unit_size: int) -> str:
    if site_buf is None or site_buf.scope != "shared":
        return f"byte {unit * unit_size}"
    return f"'{site_buf.name}'[{_idx(site_buf, unit, unit_size)}]"


class Tracker:
    """Per-unit access history of one block's shared pool, ordered by vector clocks.

    Agents are the block's threads (ids ``0 .. nthreads-1``) and the asynchronous units acting
    for them (:meth:`agent`: the copy engine of one mbarrier, the wgmma proxy of one warpgroup).
    ``vc[a, b]`` is the latest clock of agent ``b`` that agent ``a`` is ordered after; every
    synchronization (``__syncthreads()``, named barriers, mbarrier arrive/wait, wgmma
    wait_group) moves clocks, and two accesses conflict when neither is ordered after the other.
    """

    def __init__(self, pool_bytes: int, unit: int, sites: list, reporter: Reporter,
                 nthreads: int = 1, agents: int = 0, clock: Optional[np.ndarray] = None, base: int = 0):
        n = max(1, -(-pool_bytes // unit))
        self.unit = unit
        self.sites: list[Site] = sites
        self.rep = reporter
        self.nthreads = nthreads
        size = nthreads + agents
        if clock is None:  # a block of its own: its agents are the whole clock
            clock = np.zeros((size, size), np.int32)
            np.fill_diagonal(clock, 1)
        # a thread block cluster shares one clock (:func:`cluster_clock`): the block's agents are
        # its rows ``base ..``; columns are every agent of the cluster, so what a peer's agents
        # published (remote arrives, multicast copies, cluster barriers) orders the block's too
        self.base = base
        self.vc = clock[base:base + size]
        self._vflat = self.vc.reshape(-1)   # a view: vc[a, b] is _vflat[a * width + base + b]
        self._size = clock.shape[1]
        self.names: dict[int, str] = {}
        self.kinds: dict[int, str] = {}
        self.fence_clk = np.zeros(nthreads, np.int32)          # own clock at the last proxy fence
        self.fence_vc = np.zeros((nthreads, self._size), np.int32)   # what the thread saw at that fence
        self.w_thr = np.full(n, -1, np.int32)
        self.w_clk = np.zeros(n, np.int32)
        self.w_site = np.zeros(n, np.int32)
        self.w_buf = np.full(n, -1, np.int32)
        self.w_tag = np.zeros(n, np.int32)        # phase of the mbarrier a TMA write landed on
        self.r1 = np.full(n, -1, np.int32)
        self.r2 = np.full(n, -1, np.int32)
        self.r1_clk = np.zeros(n, np.int32)
        self.r2_clk = np.zeros(n, np.int32)
        self.r1_site = np.zeros(n, np.int32)
        self.r2_site = np.zeros(n, np.int32)
        self.pend = np.zeros(n, np.int32)
        self.pend_thr = np.full(n, -1, np.int32)
        self.pend_site = np.zeros(n, np.int32)
        self.pend_tag = np.zeros(n, np.int32)     # phase a TMA copy in flight completes on
        # reads since the unit's last write that r1 / r2 do not cover: (unit, agent, clock, site)
        self.xr = tuple(np.zeros(0, np.int64) for _ in range(4))
        self.xr_room = LOG_ROOM                   # entries before the log is compacted

    # -- agents and clocks ------------------------------------------------------------------------
    def agent(self, name: str, kind: str) -> int:
        """A new asynchronous agent (``kind`` "tma" or "wgmma"), named in reports."""
        a = self.nthreads + len(self.names)
        assert a < self.vc.shape[0], "more asynchronous agents than the tracker was sized for"
        self.names[a], self.kinds[a] = name, kind
        return a

    def who(self, a: int) -> str:
        return f"thread {a}" if a < self.nthreads else self.names.get(a, f"agent {a}")

    def own(self, a: Any) -> Any:
        """Agent(s) ``a``'s own clock."""
        return self.vc[a, self.base + np.asarray(a)]

    def tick(self, a: Any) -> None:
        """Agent(s) ``a`` move on."""
        self.vc[a, self.base + np.asarray(a)] += 1

    def seen(self, lanes: Any, b: int) -> Any:
        """The latest clock of this block's agent ``b`` that ``lanes`` are ordered after."""
        return self.vc[lanes, self.base + b]

    def see(self, lanes: Any, b: int, clk: int) -> None:
        """``lanes`` are ordered after agent ``b``'s clock ``clk``."""
        self.vc[lanes, self.base + b] = np.maximum(self.vc[lanes, self.base + b], clk)

    def barrier(self) -> None:
        """``__syncthreads()``: every thread is ordered after everything any thread saw (so after
        every read the threads logged: what any of them issues later is too)."""
        t = self.nthreads
        self.vc[:t] = self.vc[:t].max(0)
        self.tick(np.arange(t))
        self.forget_thread_reads()

    def forget_thread_reads(self) -> None:
        """After a barrier of every thread: the threads' logged reads are ordered before all that
        follows (an agent's reads stay: a barrier of the threads does not order them)."""
        if len(self.xr[0]):
            agent = self.xr[1] >= self.nthreads
            self.xr = tuple(x[agent] for x in self.xr)

    def sync(self, lanes: np.ndarray) -> None:
        """A barrier among ``lanes`` only (``bar.sync id, count``)."""
        self.vc[lanes] = self.vc[lanes].max(0)
        self.tick(lanes)

    def release(self, lanes: np.ndarray) -> np.ndarray:
        """What ``lanes`` publish (an arrive): the join of their clocks; they move on."""
        v = self.vc[lanes].max(0)
        self.tick(lanes)
        return v

    def acquire(self, lanes: Any, vec: np.ndarray) -> None:
        """``lanes`` are ordered after ``vec`` (a wait that passed)."""
        self.vc[lanes] = np.maximum(self.vc[lanes], vec)

    def join_agent(self, a: int, lanes: Any) -> None:
        """Agent ``a`` starts work that ``lanes`` issued: it is ordered after them."""
        self.vc[a] = np.maximum(self.vc[a], self.vc[lanes].max(0) if np.ndim(lanes) else self.vc[lanes])

    def fence(self, lanes: np.ndarray) -> None:
        """``fence.proxy.async`` by ``lanes``: their generic writes so far (and those they are
        ordered after) become visible to the async proxy."""
        self.fence_clk[lanes] = self.own(lanes)
        self.fence_vc[lanes] = self.vc[lanes]
        self.tick(lanes)

    def _unordered(self, rows: np.ndarray, agent: np.ndarray, clk: np.ndarray) -> np.ndarray:
        """Per element: ``agent``'s access at ``clk`` is not ordered before agent ``rows``."""
        # an agent of -1 reads a neighbouring entry (clipped into the table), masked off after
        got = self._vflat.take(rows * self._size + self.base + agent, mode="clip")
        return (agent >= 0) & (agent != rows) & (got < clk)

    # -- unit arithmetic ------------------------------------------------------------------------
    def units(self, byte_start: np.ndarray, nbytes: int) -> np.ndarray:
        """(k, m) units covering ``nbytes`` from each byte start."""
        u0 = np.asarray(byte_start, dtype=np.int64) // self.unit
        m = max(1, nbytes // self.unit)
        if m == 1:
            return u0[:, None]
        return u0[:, None] + np.arange(m)

    # -- checks ---------------------------------------------------------------------------------
    def _fail(self, kind: str, i: int, U: np.ndarray, L: np.ndarray, site: int, other_thr: int,
              other_site: int, buf: BufInfo, detail: str) -> None:
        s: Site = self.sites[site]
        o: Site = self.sites[other_site]
        u = int(U[i])
        here = _elem(buf, u, self.unit)
        there = _elem(o.buffer, u, self.unit)
        alias = "" if there == here or o.buffer is None else f" (the same bytes as {there})"
        me, other = self.who(int(L[i])), self.who(other_thr)
        msg = (f"{kind} on shared buffer '{buf.name}' element {_idx(buf, u, self.unit)}{alias}: "
               f"{detail.format(t=me, o=other)} ({self.rep.block})\n"
               f"  {me}: {s.where()}\n"
               f"  {other}: {o.where()}")
        key = (kind, site, other_site)
        self.rep.report(RaceError(msg, s.span, hint=_HINTS.get(kind)), key)

    def _kind(self, a: int) -> str:
        return self.kinds.get(a, "thread")

    def read(self, U: np.ndarray, L: np.ndarray, site: int, buf: BufInfo) -> None:
        """Agents ``L`` (k,) read units ``U`` (k, m)."""
        L2 = np.broadcast_to(L[:, None], U.shape).ravel()
        U = U.ravel()
        wt = self.w_thr[U]
        wb = self.w_buf[U]
        bad = (wb != buf.index) | (self.pend[U] > 0) | self._unordered(L2, wt, self.w_clk[U])
        if bad.any():
            self._read_finding(U, L2, wt, wb, bad, site, buf)
        own = self.own(L2)
        take = ~self._unordered(L2, self.r1[U], self.r1_clk[U])
        if take.any():
            ut = U[take]
            self.r1[ut], self.r1_clk[ut], self.r1_site[ut] = L2[take], own[take], site
        other = (L2 != self.r1[U]) & ~self._unordered(L2, self.r2[U], self.r2_clk[U])
        if other.any():
            uo = U[other]
            self.r2[uo], self.r2_clk[uo], self.r2_site[uo] = L2[other], own[other], site
        r1, r2 = self.r1[U], self.r2[U]
        lost = (r1 != L2) & (r2 != L2)  # neither slot holds this read (another lane took it)
        if lost.any():
            lost &= ~self._before(L2, own, r1) & ~self._before(L2, own, r2)
            if lost.any():
                new = (U[lost], L2[lost], own[lost], np.full(int(lost.sum()), site))
                self.xr = tuple(np.concatenate([x, y.astype(np.int64)]) for x, y in zip(self.xr, new))
                if len(self.xr[0]) > self.xr_room:
                    self._compact()

    def _compact(self) -> None:
        """One logged read per unit and reader, its latest: whoever is ordered after a reader's
        later read is ordered after its earlier ones."""
        u, a, c, _ = self.xr
        key = u * self.vc.shape[0] + a
        order = np.lexsort((c, key))
        k = key[order]
        last = order[np.r_[k[1:] != k[:-1], True]]
        self.xr = tuple(x[last] for x in self.xr)
        self.xr_room = max(LOG_ROOM, 2 * len(last))

    def _before(self, a: np.ndarray, clk: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Per element: agent ``a``'s access at ``clk`` is ordered before agent ``b`` (b >= 0)."""
        return (b >= 0) & (self.vc[np.where(b >= 0, b, 0), self.base + a] >= clk)

    def _logged_reads(self, U: np.ndarray, L: np.ndarray, clear: bool) -> Optional[tuple]:
        """The first logged read of units ``U`` that the writer of that unit (``L``, per element)
        is not ordered after: (index into U, reader, its site); the units' entries go when ``clear``."""
        xu, xa, xc, xs = self.xr
        if not len(xu):
            return None
        hit = np.isin(xu, U)
        if not hit.any():
            return None
        order = np.argsort(U, kind="stable")
        k = order[np.searchsorted(U[order], xu[hit])]    # a writer of each logged unit
        a, c, w = xa[hit], xc[hit], L[k]
        bad = (a != w) & (self.vc[w, self.base + a] < c)
        found = None
        if bad.any():
            j = int(np.flatnonzero(bad)[0])
            found = (int(k[j]), int(a[j]), int(xs[hit][j]))
        if clear:
            self.xr = tuple(x[~hit] for x in self.xr)
        return found

    def _read_finding(self, U, L, wt, wb, bad, site, buf) -> None:
        i = int(np.flatnonzero(bad)[0])
        u = int(U[i])
        if self.pend[u] > 0:
            o = int(self.pend_thr[u])
            if self._kind(o) == "tma":
                self._fail("read of a TMA destination before its phase completes", i, U, L, site, o,
                           int(self.pend_site[u]), buf,
                           "{t} reads it while {o} into it (phase " + str(int(self.pend_tag[u]))
                           + ") is still in flight")
            else:
                self._fail("read of data still in flight", i, U, L, site, o, int(self.pend_site[u]), buf,
                           "{t} reads it while {o}'s cp.async into it has not been waited for")
        elif wt[i] < 0:
            s = self.sites[site]
            msg = (f"read of uninitialized shared memory: '{buf.name}' element "
                   f"{_idx(buf, u, self.unit)} is read by {self.who(int(L[i]))} "
                   f"but was never written ({self.rep.block})\n  {self.who(int(L[i]))}: {s.where()}")
            self.rep.report(RaceError(msg, s.span), ("uninit", site))
        elif wb[i] != buf.index:
            s = self.sites[site]
            o = self.sites[int(self.w_site[u])]
            msg = (f"read of uninitialized shared memory: '{buf.name}' element "
                   f"{_idx(buf, u, self.unit)} is read by {self.who(int(L[i]))}, "
                   f"but its bytes were last written through '{o.buffer.name if o.buffer else '?'}' "
                   f"({self.rep.block})\n  {self.who(int(L[i]))}: {s.where()}\n"
                   f"  {self.who(int(wt[i]))}: {o.where()}")
            self.rep.report(RaceError(msg, s.span), ("alias", site, int(self.w_site[u])))
        elif self._kind(int(wt[i])) == "tma":
            self._fail("read of a TMA destination before its phase completes", i, U, L, site, int(wt[i]),
                       int(self.w_site[u]), buf,
                       "{t} reads it without a wait that observes phase " + str(int(self.w_tag[u]))
                       + ", on which {o} completes")
        else:
            self._fail("data race (read after write)", i, U, L, site, int(wt[i]), int(self.w_site[u]), buf,
                       "{t} reads it after {o} wrote it, with no barrier in between")

    def write(self, U: np.ndarray, L: np.ndarray, site: int, buf: BufInfo, landing: bool = False) -> None:
        """Agents ``L`` (k,) write units ``U`` (k, m)."""
        L2 = np.broadcast_to(L[:, None], U.shape).ravel()
        U = U.ravel()
        wt = self.w_thr[U]
        waw = self._unordered(L2, wt, self.w_clk[U])
        r1, r2 = self.r1[U], self.r2[U]
        war1 = self._unordered(L2, r1, self.r1_clk[U])
        war2 = self._unordered(L2, r2, self.r2_clk[U])
        pend = (self.pend[U] > 0) if not landing else np.zeros(U.shape, bool)
        if waw.any() or war1.any() or war2.any() or pend.any():
            self._write_finding(U, L2, wt, waw, war1, war2, pend, site, buf)
        logged = self._logged_reads(U, L2, clear=True)
        if logged is not None:
            self._war(logged[0], U, L2, site, logged[1], logged[2], buf)
        if len(U) > 1:
            self._same_op_conflicts(U, L2, site, buf)
        self.w_thr[U] = L2
        self.w_clk[U] = self.own(L2)
        self.w_site[U] = site
        self.w_buf[U] = buf.index
        self.r1[U] = -1
        self.r2[U] = -1

    def _write_finding(self, U, L, wt, waw, war1, war2, pend, site, buf) -> None:
        if pend.any():
            i = int(np.flatnonzero(pend)[0])
            u = int(U[i])
            o = int(self.pend_thr[u])
            what = "the TMA load" if self._kind(o) == "tma" else "cp.async"
            self._fail("write to data still in flight", i, U, L, site, o, int(self.pend_site[u]), buf,
                       "{t} writes it while {o}'s " + what + " into it has not completed")
        elif war1.any() or war2.any():
            first = war1 if war1.any() else war2
            i = int(np.flatnonzero(first)[0])
            u = int(U[i])
            o, osite = (int(self.r1[u]), int(self.r1_site[u])) if war1.any() else \
                (int(self.r2[u]), int(self.r2_site[u]))
            self._war(i, U, L, site, o, osite, buf)
        else:
            i = int(np.flatnonzero(waw)[0])
            self._fail("data race (write after write)", i, U, L, site, int(wt[i]), int(self.w_site[int(U[i])]),
                       buf, "{t} writes it after {o} wrote it, with no barrier in between")

    def _war(self, i: int, U, L, site: int, o: int, osite: int, buf: BufInfo) -> None:
        """Write ``i`` of ``U`` by ``L[i]`` is not ordered after the read by ``o`` at ``osite``."""
        me = int(L[i])
        if self._kind(me) == "tma":
            self._fail("stage reused before the consumer released it (write after read)", i, U, L, site,
                       o, osite, buf, "{t} overwrites it while the read by {o} is not ordered before it "
                       "(no wait on the stage's empty barrier, wgmma.wait_group or barrier in between)")
        elif self._kind(o) == "tma_store":
            self._fail("tile rewritten while a TMA store still reads it", i, U, L, site, o, osite, buf,
                       "{t} writes it while {o} may still read it (no tma_store_wait, then a barrier, "
                       "in between)")
        elif self._kind(o) == "wgmma":
            self._fail("write to a wgmma operand still being read", i, U, L, site, o, osite, buf,
                       "{t} writes it while {o} may still read it (no wgmma.wait_group retired "
                       "that read before the write)")
        else:
            self._fail("data race (write after read)", i, U, L, site, o, osite, buf,
                       "{t} writes it after {o} read it, with no barrier in between")

    def _same_op_conflicts(self, U, L, site, buf) -> None:
        order = np.argsort(U, kind="stable")
        us, ls = U[order], L[order]
        clash = (us[1:] == us[:-1]) & (ls[1:] != ls[:-1])
        if clash.any():
            j = int(np.flatnonzero(clash)[0])
            i = int(order[j + 1])
            self._fail("data race (write after write)", i, U, L, site, int(ls[j]), site, buf,
                       "{o} and {t} write it in the same statement")

    # -- the async proxy --------------------------------------------------------------------------
    def async_read(self, U: np.ndarray, a: int, issuers: np.ndarray, site: int, buf: BufInfo) -> None:
        """Agent ``a`` (wgmma, a TMA store), issued by ``issuers``, reads units ``U`` (any
        shape): generic writes must have been fenced (``fence.proxy.async``) in between."""
        Uf = np.asarray(U).ravel()
        wt = self.w_thr[Uf]
        generic = (wt >= 0) & (wt < self.nthreads)
        if generic.any():
            w = np.where(generic, wt, 0)
            clk = self.w_clk[Uf]
            seen = self.fence_vc[issuers].max(0)[self.base + w] if len(issuers) else np.zeros_like(clk)
            unfenced = generic & (self.fence_clk[w] < clk) & (seen < clk)
            if unfenced.any():
                i = int(np.flatnonzero(unfenced)[0])
                u = int(Uf[i])
                L = np.full(len(Uf), a, np.int32)
                self._fail("generic-proxy write read by the async proxy without fence.proxy.async", i, Uf, L,
                           site, int(wt[i]), int(self.w_site[u]), buf,
                           "{t} reads it through the async proxy after {o} wrote it with a generic store, "
                           "and no fence.proxy.async lies between the write and the read")
        self.read(Uf[:, None], np.full(len(Uf), a, np.int32), site, buf)

    # -- cp.async and TMA -------------------------------------------------------------------------
    def issue(self, U: np.ndarray, L: np.ndarray, site: int, buf: BufInfo, tag: int = 0,
              distinct: bool = False) -> None:
        """An asynchronous copy by agents ``L`` into units ``U`` begins: it may land at any time
        until its completion, so it conflicts with accesses not ordered before it already."""
        L2 = np.broadcast_to(L[:, None], U.shape).ravel()
        Uf = U.ravel()
        wt = self.w_thr[Uf]
        waw = self._unordered(L2, wt, self.w_clk[Uf])
        war1 = self._unordered(L2, self.r1[Uf], self.r1_clk[Uf])
        war2 = self._unordered(L2, self.r2[Uf], self.r2_clk[Uf])
        pend = self.pend[Uf] > 0
        if waw.any() or war1.any() or war2.any() or pend.any():
            self._write_finding(Uf, L2, wt, waw, war1, war2, pend, site, buf)
        logged = self._logged_reads(Uf, L2, clear=False)
        if logged is not None:
            self._war(logged[0], Uf, L2, site, logged[1], logged[2], buf)
        if distinct:  # no unit twice: a plain increment
            self.pend[Uf] += 1
        else:
            np.add.at(self.pend, Uf, 1)
        self.pend_thr[Uf] = L2
        self.pend_site[Uf] = site
        self.pend_tag[Uf] = tag

    def land(self, U: np.ndarray, L: np.ndarray, site: int, buf: BufInfo, tag: int = 0,
             distinct: bool = False) -> None:
        if distinct:
            self.pend[U.ravel()] -= 1
        else:
            np.subtract.at(self.pend, U.ravel(), 1)
        self.write(U, L, site, buf, landing=True)
        self.w_tag[U.ravel()] = tag


_HINTS = {
    "data race (read after write)": "a __syncthreads() is needed between the write and the read "
                                    "(was barrier insertion disabled?)",
    "data race (write after read)": "a __syncthreads() is needed between the read and the write "
                                    "(was barrier insertion disabled?)",
    "data race (write after write)": "make one thread write each element, or separate the writes by a barrier",
    "read of data still in flight": "cp_async_wait must complete the copy (and a barrier publish it) "
                                    "before the data is read",
    "write to data still in flight": "wait for the cp.async before writing the same bytes again",
    "read of a TMA destination before its phase completes": "wait on the stage's mbarrier "
        "(T.mbarrier_wait_parity) before reading what the TMA load brings",
    "stage reused before the consumer released it (write after read)": "the producer must wait on the "
        "stage's empty barrier, which the consumers arrive on after their last read",
    "tile rewritten while a TMA store still reads it": "tl::tma_store_wait<0>() by the issuing thread, "
        "then a barrier, before the tile is written again",
    "write to a wgmma operand still being read": "wgmma.wait_group must retire the wgmma before its "
        "operands are overwritten",
    "generic-proxy write read by the async proxy without fence.proxy.async": "put "
        "tl::fence_proxy_async() between the generic stores and the TMA / wgmma that reads them",
}
