"""Memory of the emulated GPU: global arrays, the shared pool, per-thread registers.

- **global** buffers are the caller's numpy arrays, seen flat (C order).
- **shared** buffers are typed views into one byte pool per block, at the byte offsets the CUDA
  pipeline planned (``annotations["smem_offsets"]``), so buffers that share bytes alias exactly
  as on the device. The pool starts as 0xFF bytes (NaN for floats, -1 for ints).
- **local** buffers are ``(numel, nthreads)`` arrays (element k of every thread is one row);
  **local.var** buffers are arrays of one value per thread.

Element accesses check bounds (per dimension for global buffers, against the buffer's extent
for shared and local ones) for the active threads; vector accesses through addresses
(``address_of``) check that the whole byte range lies inside the buffer and is aligned.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from tegula.errors import RaceError
from tegula.backends.closure import checks_unwritten, unwritten_read
from tegula.backends.emu.context import BufInfo, where
from tegula.backends.emu.races import Reporter, Tracker


@dataclass
class AsyncCopy:
    """cp.async copies issued by one statement, not landed yet (one row per thread)."""

    lanes: np.ndarray      # (k,) issuing threads
    group: np.ndarray      # (k,) commit group each row belongs to
    pos: np.ndarray        # (k, B) pool byte positions
    data: np.ndarray       # (k, B) bytes to land
    units: np.ndarray      # (k, m) tracker units
    site: int
    buf: BufInfo


@dataclass
class BlockState:
    """Everything one thread block owns while it runs."""

    nthreads: int
    pool: np.ndarray
    tracker: Tracker
    rep: Reporter
    lanes: np.ndarray
    committed: np.ndarray                        # per thread: cp.async groups committed so far
    pending: list = field(default_factory=list)  # AsyncCopy records
    views: dict = field(default_factory=dict)    # np dtype -> pool view
    mbarriers: dict = field(default_factory=dict)  # (buffer index, element) -> mbarrier.Bar
    shared_infos: list = field(default_factory=list)  # BufInfo of the shared buffers
    local_slots: dict = field(default_factory=dict)   # local buffer index -> env slot
    hopper: Any = None                               # hopper.Hopper, made when first needed
    scheduler: Any = None                            # tasks.Scheduler of a warp-specialized block
    named: Any = None                                # named_barriers: barrier id -> Phase
    task: Any = None                                 # the task running the block (a cluster's block)
    cluster: Any = None                              # cluster.Cluster the block belongs to, if any
    rank: int = 0                                    # its rank in that cluster (%cluster_ctarank)

    def pool_view(self, d: np.dtype) -> np.ndarray:
        v = self.views.get(d)
        if v is None:
            v = self.views[d] = self.pool.view(d)
        return v


@dataclass(frozen=True)
class Addr:
    """``&buf[flat]`` for every thread: ``flat`` is a scalar or one element index per thread."""

    buf: BufInfo
    flat: Any


# ---------------------------------------------------------------------------------------------
# Bounds
# ---------------------------------------------------------------------------------------------

def _first_lane(bad: np.ndarray) -> int:
    return int(np.flatnonzero(bad)[0])


def check_dims(st: BlockState, info: BufInfo, idx: list, dims: list, mask: Optional[np.ndarray],
               span: Any) -> Optional[np.ndarray]:
    """Per-dimension bounds of an element access; returns the mask of threads that may go ahead
    (``mask`` itself when all in bounds) and reports the first active thread out of bounds."""
    bad: Any = False
    for i, n in zip(idx, dims):
        bad = bad | (i < 0) | (i >= n)
    if not np.any(bad):
        return mask
    n = st.nthreads
    bad = np.broadcast_to(np.asarray(bad), (n,))
    live = bad if mask is None else (bad & mask)
    if live.any():
        t = _first_lane(live)
        at = ", ".join(str(int(np.broadcast_to(i, (n,))[t])) for i in idx)
        st.rep.oob(f"thread {t} accesses index [{at}] out of bounds of {info.scope} buffer "
                   f"'{info.name}' with shape {tuple(int(d) for d in dims)}", span, (info.index, id(span)))
    ok = ~bad
    return ok if mask is None else (mask & ok)


def check_range(st: BlockState, info: BufInfo, f: np.ndarray, count: int, lanes: np.ndarray,
                total: int, span: Any, what: str) -> np.ndarray:
    """Elements ``f .. f+count`` (``f``: one start per lane of ``lanes``) in ``[0, total)``;
    returns the lanes that may go ahead."""
    bad = (f < 0) | (f + count > total)
    if not bad.any():
        return lanes
    j = _first_lane(bad)
    st.rep.oob(f"thread {int(lanes[j])}: {what} of {count} element(s) at index {int(f[j])} is out of "
               f"bounds of {info.scope} buffer '{info.name}' with {total} element(s)", span,
               (info.index, id(span)))
    return lanes[~bad]


def check_align(st: BlockState, info: BufInfo, byte_start: np.ndarray, lanes: np.ndarray,
                nbytes: int, span: Any, what: str) -> None:
    mis = (byte_start % nbytes) != 0
    if mis.any():
        j = _first_lane(mis)
        st.rep.report(RaceError(f"misaligned {nbytes}-byte {what}: thread {int(lanes[j])} uses byte "
                                f"offset {int(byte_start[j])} of {info.scope} buffer '{info.name}' "
                                f"({st.rep.block})", span), ("align", id(span)))


def check_tma_sources(st: BlockState, info: BufInfo, arr: np.ndarray, flat: np.ndarray, lanes: np.ndarray,
                      span: Any) -> None:
    """Report a write of elements ``flat`` (``(k,)`` or ``(k, c)``, row ``i`` by thread
    ``lanes[i]``) of global buffer ``info`` (its array ``arr``) that a TMA load in flight reads:
    the copy engine reads global memory until the load completes, so which value lands is not
    defined (a race)."""
    for b in st.mbarriers.values():
        for c in b.inflight:
            if c.src is not arr:
                continue
            rows = np.asarray(flat).reshape(len(lanes), -1)
            hit = np.isin(rows, c.flat[c.ok])
            if not hit.any():
                continue
            i = int(np.flatnonzero(hit.any(axis=1))[0])
            elem = int(rows[i][hit[i]][0])
            me, tma = f"thread {int(lanes[i])}", f"the TMA load on mbarrier '{b.name}' issued by thread {c.lane}"
            msg = (f"data race on global buffer '{info.name}' element {elem}: {me} writes it while {tma} "
                   f"(phase {b.phase}) still reads it ({st.rep.block})\n"
                   f"  {me}: {where(span)}\n"
                   f"  thread {c.lane}: {st.tracker.sites[c.site].where()}")
            st.rep.report(RaceError(msg, span, hint="wait for the load's phase (T.mbarrier_wait_parity) before "
                                    "writing the global memory it reads"), ("tma source", id(span), c.site))
            return


# ---------------------------------------------------------------------------------------------
# Vector accesses through addresses
# ---------------------------------------------------------------------------------------------

def _flat_of(st: BlockState, addr: Addr, lanes: np.ndarray) -> np.ndarray:
    return np.broadcast_to(np.asarray(addr.flat, dtype=np.int64), (st.nthreads,))[lanes]


def _local_elems(arr: np.ndarray, f: np.ndarray, lanes: np.ndarray, count: int) -> tuple:
    if count == 1:
        return f[:, None], lanes[:, None]
    return f[:, None] + np.arange(count), lanes[:, None]


# reads of registers that use their values (vector loads and copies only move them along)
_USES = ("mma A fragment", "mma B fragment", "mma accumulator", "atomic")


def read_elems(env: list, st: BlockState, addr: Addr, lanes: np.ndarray, nbytes: int,
               d: np.dtype, site: int, span: Any, what: str) -> tuple[np.ndarray, np.ndarray]:
    """The ``nbytes`` at ``addr`` of each of ``lanes`` as ``(k, nbytes / d.itemsize)`` values of
    dtype ``d``; returns (values, lanes actually read)."""
    info = addr.buf
    arr = env[info.slot]
    isz = info.itemsize
    count = nbytes // isz
    f = _flat_of(st, addr, lanes)
    total = arr.shape[0] if info.scope != "local.var" else 1
    if info.scope == "local.var":
        raise RaceError(f"{what}: cannot take a vector of a scalar variable '{info.name}'", span)
    if nbytes % isz:
        raise RaceError(f"{what}: {nbytes} bytes is not a whole number of '{info.name}' elements", span)
    ok = check_range(st, info, f, count, lanes, total, span, what)
    if len(ok) != len(lanes):
        keep = np.isin(lanes, ok)
        lanes, f = lanes[keep], f[keep]
    if info.scope == "local":
        vals = arr[_local_elems(arr, f, lanes, count)]
        if what in _USES and checks_unwritten(info.buffer):   # registers never written (a missing T.clear)
            unwritten_read(info.buffer, vals, span, what + ": a read", tile=False)
    else:
        vals = arr[f[:, None] + np.arange(count)] if count > 1 else arr[f][:, None]
        if info.scope == "shared":
            st.tracker.read(st.tracker.units(info.offset + f * isz, nbytes), lanes, site, info)
    if vals.dtype != d:
        vals = np.ascontiguousarray(vals).view(np.uint8).view(d)
    return vals, lanes


def write_elems(env: list, st: BlockState, addr: Addr, lanes: np.ndarray, vals: np.ndarray,
                site: int, span: Any, what: str) -> None:
    """Store ``vals`` ``(k, n)`` (any dtype: its bytes) at ``addr`` for each of ``lanes``."""
    info = addr.buf
    arr = env[info.slot]
    isz = info.itemsize
    nbytes = vals.shape[1] * vals.dtype.itemsize
    if vals.dtype != info.np:
        vals = np.ascontiguousarray(vals).view(np.uint8).view(info.np)
    count = nbytes // isz
    f = _flat_of(st, addr, lanes)
    ok = check_range(st, info, f, count, lanes, arr.shape[0], span, what)
    if len(ok) != len(lanes):
        keep = np.isin(lanes, ok)
        lanes, f, vals = lanes[keep], f[keep], vals[keep]
    if info.scope == "local":
        arr[_local_elems(arr, f, lanes, count)] = vals
        return
    if info.scope == "shared":
        st.tracker.write(st.tracker.units(info.offset + f * isz, nbytes), lanes, site, info)
    elif st.mbarriers:
        check_tma_sources(st, info, arr, f[:, None] + np.arange(count), lanes, span)
    if count == 1:
        arr[f] = vals[:, 0]
    else:
        arr[f[:, None] + np.arange(count)] = vals


def byte_offset(st: BlockState, addr: Addr, lanes: np.ndarray) -> np.ndarray:
    """Byte offset of each lane's address inside its buffer (for alignment checks)."""
    return _flat_of(st, addr, lanes) * addr.buf.itemsize + (addr.buf.offset if addr.buf.scope == "shared" else 0)
