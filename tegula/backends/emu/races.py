"""Shared-memory race and initialization tracking for one thread block.

The shared pool is cut into *units* of the smallest element size among the kernel's shared
buffers (so an element covers one or more whole units, and aliased buffers share units). Per
unit the tracker keeps the last writer thread, the barrier epoch of that write, its site and the
buffer written, and up to two distinct readers of the current epoch. The epoch grows at every
``__syncthreads()``. An access conflicts with another thread's access of the same unit in the
same epoch when at least one of them writes: read-after-write, write-after-read and
write-after-write. A read of a unit never written (or last written through another buffer that
shares its bytes) is an uninitialized read. cp.async writes count when they land (at the
matching wait); until then any access of their units by any thread is reported too.
"""
from __future__ import annotations

import warnings
from typing import Optional

import numpy as np

from tegula.errors import OutOfBoundsError, RaceError, TegulaError
from tegula.backends.emu.context import BufInfo, Site


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
    """Per-unit access history of one block's shared pool."""

    def __init__(self, pool_bytes: int, unit: int, sites: list, reporter: Reporter):
        n = max(1, -(-pool_bytes // unit))
        self.unit = unit
        self.sites: list[Site] = sites
        self.rep = reporter
        self.epoch = 0
        self.w_thr = np.full(n, -1, np.int32)
        self.w_ep = np.full(n, -1, np.int32)
        self.w_site = np.zeros(n, np.int32)
        self.w_buf = np.full(n, -1, np.int32)
        self.r1 = np.full(n, -1, np.int32)
        self.r2 = np.full(n, -1, np.int32)
        self.r_ep = np.full(n, -1, np.int32)
        self.r1_site = np.zeros(n, np.int32)
        self.r2_site = np.zeros(n, np.int32)
        self.pend = np.zeros(n, np.int32)
        self.pend_thr = np.full(n, -1, np.int32)
        self.pend_site = np.zeros(n, np.int32)

    # -- unit arithmetic ------------------------------------------------------------------------
    def units(self, byte_start: np.ndarray, nbytes: int) -> np.ndarray:
        """(k, m) units covering ``nbytes`` from each byte start."""
        u0 = np.asarray(byte_start, dtype=np.int64) // self.unit
        m = max(1, nbytes // self.unit)
        if m == 1:
            return u0[:, None]
        return u0[:, None] + np.arange(m)

    def barrier(self) -> None:
        self.epoch += 1

    # -- checks ---------------------------------------------------------------------------------
    def _fail(self, kind: str, i: int, U: np.ndarray, L: np.ndarray, site: int, other_thr: int,
              other_site: int, buf: BufInfo, detail: str) -> None:
        s: Site = self.sites[site]
        o: Site = self.sites[other_site]
        u = int(U[i])
        here = _elem(buf, u, self.unit)
        there = _elem(o.buffer, u, self.unit)
        alias = "" if there == here or o.buffer is None else f" (the same bytes as {there})"
        msg = (f"{kind} on shared buffer '{buf.name}' element {_idx(buf, u, self.unit)}{alias}: "
               f"{detail.format(t=int(L[i]), o=other_thr)} ({self.rep.block})\n"
               f"  thread {int(L[i])}: {s.where()}\n"
               f"  thread {other_thr}: {o.where()}")
        key = (kind, site, other_site)
        self.rep.report(RaceError(msg, s.span, hint=_HINTS.get(kind)), key)

    def read(self, U: np.ndarray, L: np.ndarray, site: int, buf: BufInfo) -> None:
        """Threads ``L`` (k,) read units ``U`` (k, m)."""
        L2 = np.broadcast_to(L[:, None], U.shape).ravel()
        U = U.ravel()
        ep = self.epoch
        wt = self.w_thr[U]
        wb = self.w_buf[U]
        bad = (wb != buf.index) | (self.pend[U] > 0) | ((self.w_ep[U] == ep) & (wt != L2))
        if bad.any():
            self._read_finding(U, L2, wt, wb, bad, site, buf)
        stale = self.r_ep[U] != ep
        if stale.any():
            us = U[stale]
            self.r1[us] = L2[stale]
            self.r1_site[us] = site
            self.r2[us] = -1
            self.r_ep[us] = ep
        other = L2 != self.r1[U]
        if other.any():
            uo, lo = U[other], L2[other]
            free = self.r2[uo] < 0
            if free.any():
                self.r2[uo[free]] = lo[free]
                self.r2_site[uo[free]] = site

    def _read_finding(self, U, L, wt, wb, bad, site, buf) -> None:
        i = int(np.flatnonzero(bad)[0])
        u = int(U[i])
        if self.pend[u] > 0:
            self._fail("read of data still in flight", i, U, L, site, int(self.pend_thr[u]),
                       int(self.pend_site[u]), buf,
                       "thread {t} reads it while thread {o}'s cp.async into it has not been waited for")
        elif wt[i] < 0:
            s = self.sites[site]
            msg = (f"read of uninitialized shared memory: '{buf.name}' element "
                   f"{_idx(buf, u, self.unit)} is read by thread {int(L[i])} "
                   f"but was never written ({self.rep.block})\n  thread {int(L[i])}: {s.where()}")
            self.rep.report(RaceError(msg, s.span), ("uninit", site))
        elif wb[i] != buf.index:
            s = self.sites[site]
            o = self.sites[int(self.w_site[u])]
            msg = (f"read of uninitialized shared memory: '{buf.name}' element "
                   f"{_idx(buf, u, self.unit)} is read by thread {int(L[i])}, "
                   f"but its bytes were last written through '{o.buffer.name if o.buffer else '?'}' "
                   f"({self.rep.block})\n  thread {int(L[i])}: {s.where()}\n"
                   f"  thread {int(wt[i])}: {o.where()}")
            self.rep.report(RaceError(msg, s.span), ("alias", site, int(self.w_site[u])))
        else:
            self._fail("data race (read after write)", i, U, L, site, int(wt[i]), int(self.w_site[u]), buf,
                       "thread {t} reads it after thread {o} wrote it, with no barrier in between")

    def write(self, U: np.ndarray, L: np.ndarray, site: int, buf: BufInfo, landing: bool = False) -> None:
        """Threads ``L`` (k,) write units ``U`` (k, m)."""
        L2 = np.broadcast_to(L[:, None], U.shape).ravel()
        U = U.ravel()
        ep = self.epoch
        wt = self.w_thr[U]
        waw = (self.w_ep[U] == ep) & (wt >= 0) & (wt != L2)
        r1 = self.r1[U]
        r2 = self.r2[U]
        war = (self.r_ep[U] == ep) & ((r1 != L2) | (r2 >= 0))
        pend = (self.pend[U] > 0) if not landing else np.zeros(U.shape, bool)
        if waw.any() or war.any() or pend.any():
            self._write_finding(U, L2, wt, r1, r2, waw, war, pend, site, buf)
        if len(U) > 1:
            self._same_op_conflicts(U, L2, site, buf)
        self.w_thr[U] = L2
        self.w_ep[U] = ep
        self.w_site[U] = site
        self.w_buf[U] = buf.index

    def _write_finding(self, U, L, wt, r1, r2, waw, war, pend, site, buf) -> None:
        if pend.any():
            i = int(np.flatnonzero(pend)[0])
            u = int(U[i])
            self._fail("write to data still in flight", i, U, L, site, int(self.pend_thr[u]),
                       int(self.pend_site[u]), buf,
                       "thread {t} writes it while thread {o}'s cp.async into it has not been waited for")
        elif war.any():
            i = int(np.flatnonzero(war)[0])
            u = int(U[i])
            if r1[i] != L[i]:
                o, osite = int(r1[i]), int(self.r1_site[u])
            else:
                o, osite = int(r2[i]), int(self.r2_site[u])
            self._fail("data race (write after read)", i, U, L, site, o, osite, buf,
                       "thread {t} writes it after thread {o} read it, with no barrier in between")
        else:
            i = int(np.flatnonzero(waw)[0])
            self._fail("data race (write after write)", i, U, L, site, int(wt[i]), int(self.w_site[int(U[i])]),
                       buf, "thread {t} writes it after thread {o} wrote it, with no barrier in between")

    def _same_op_conflicts(self, U, L, site, buf) -> None:
        order = np.argsort(U, kind="stable")
        us, ls = U[order], L[order]
        clash = (us[1:] == us[:-1]) & (ls[1:] != ls[:-1])
        if clash.any():
            j = int(np.flatnonzero(clash)[0])
            i = int(order[j + 1])
            self._fail("data race (write after write)", i, U, L, site, int(ls[j]), site, buf,
                       "threads {o} and {t} write it in the same statement")

    # -- cp.async ---------------------------------------------------------------------------------
    def issue(self, U: np.ndarray, L: np.ndarray, site: int, buf: BufInfo) -> None:
        """cp.async from threads ``L`` into units ``U`` begins: it may land at any time until the
        wait, so it conflicts with other threads' accesses of this epoch already."""
        L2 = np.broadcast_to(L[:, None], U.shape).ravel()
        Uf = U.ravel()
        ep = self.epoch
        wt = self.w_thr[Uf]
        waw = (self.w_ep[Uf] == ep) & (wt >= 0) & (wt != L2)
        r1, r2 = self.r1[Uf], self.r2[Uf]
        war = (self.r_ep[Uf] == ep) & ((r1 != L2) | (r2 >= 0))
        pend = self.pend[Uf] > 0
        if waw.any() or war.any() or pend.any():
            self._write_finding(Uf, L2, wt, r1, r2, waw, war, pend, site, buf)
        np.add.at(self.pend, Uf, 1)
        self.pend_thr[Uf] = L2
        self.pend_site[Uf] = site

    def land(self, U: np.ndarray, L: np.ndarray, site: int, buf: BufInfo) -> None:
        np.subtract.at(self.pend, U.ravel(), 1)
        self.write(U, L, site, buf, landing=True)


_HINTS = {
    "data race (read after write)": "a __syncthreads() is needed between the write and the read "
                                    "(was barrier insertion disabled?)",
    "data race (write after read)": "a __syncthreads() is needed between the read and the write "
                                    "(was barrier insertion disabled?)",
    "data race (write after write)": "make one thread write each element, or separate the writes by a barrier",
    "read of data still in flight": "cp_async_wait must complete the copy (and a barrier publish it) "
                                    "before the data is read",
    "write to data still in flight": "wait for the cp.async before writing the same bytes again",
}
