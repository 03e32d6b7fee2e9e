"""Ping-pong of consumer warpgroups (sm_90a, a rule of ``WarpSpecialize``; ``tegula.ws_pingpong``).

In the softmax overlap's warp-specialized split (:func:`warp_specialize._split_attention`) each
consumer warpgroup issues its gemms (G1 of key block ``j``, G2 of ``j - 1``) and then runs the
softmax of block ``j`` while they compute. Left alone, the warpgroups drift into step and issue
their gemms at the same moment, so the tensor cores idle while both run their softmax. With
ping-pong the warpgroups take turns at issuing, in a fixed cycle (0, 1, ..., W - 1, 0, ...), so
one warpgroup's softmax runs while the next one's gemms keep the tensor cores busy (FlashAttention
3's schedule). The turns are named barriers of their own, one per warpgroup, each for 256
threads: warpgroup ``w`` waits at barrier ``PINGPONG_BARRIER + w`` (``bar.sync``: its 128
threads) until warpgroup ``w - 1`` has arrived there (``bar.arrive``: 128 more, without waiting)
after issuing its gemms.

Before/after (the consumers' side, two warpgroups; ``wg = thread_idx // 128``)::

    G1(0); softmax(0)                           if wg == 1: bar.arrive(9, 256)       # warpgroup 0 starts
    for j in T.serial(1, n):                    G1(0); softmax(0)                    # side by side
        wait K[j]                               for j in T.serial(1, n):
        async G1(j); async G2(j - 1)
        wgmma_wait(1); softmax(j)                   wait K[j]
        wgmma_wait(0); ...                          bar.sync(9 + wg, 256)              # my turn
                                                    async G1(j); async G2(j - 1)
                                                    bar.arrive(9 + (wg + 1) % 2, 256)  # the next one's
                                                    wgmma_wait(1); softmax(j)
                                                    wgmma_wait(0); ...
                                                ...; epilogue
                                                if wg == 0: bar.sync(9, 256)          # the last turn's arrival

Every warpgroup takes and gives as many turns; the arrival warpgroup ``W - 1`` makes before the
first turn is taken by warpgroup 0's ``bar.sync`` at the very end, so each barrier's phases
balance (the emulator reports a phase left open, an arrival twice in one phase and a deadlock).
The peeled first key block runs outside the turns: the barrier the consumers meet at before their
first gemm (for a Q tile they wrote themselves) would otherwise sit inside warpgroup 0's turn
while warpgroup 1 waits for its own.

When it applies (:func:`turns_for`): an attention-shaped loop split into the softmax overlap's
schedule whose block has two or more consumer warpgroups; ``tegula.ws_pingpong`` forces it on or
off there; unset, loops of at most :data:`WS_PINGPONG_MAX_BLOCKS` key blocks take it: none, since
on an H200 it measured +3.6%, -2.5% and -1.4% at 32 key blocks in three calls and -0.9% at 128.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Optional

from tegula.ir import dtype as dt
from tegula.ir import expr as E
from tegula.ir.stmt import WARPGROUP, Evaluate, IfThenElse, Stmt

# the first named barrier of the turns: 0 is __syncthreads', 1 + first thread // 128 (1..8) the
# warp-specialized regions' own (lower_tile_ops._warp_specialized)
PINGPONG_BARRIER = 9
# ping-pong by default in the overlap's split of loops of at most this many key blocks (a trip count
# known when the kernel is built): none. Measured on an H200, d128 128x128 tiles, 32 key blocks
# (4x16x4096), median of interleaved rounds against the same kernel without the turns: +3.6% (8
# rounds, 2026-12-01 23:11 UTC), then -2.5% (3 rounds, 00:53 UTC) and -1.4% (12 rounds, 00:58 UTC);
# at 128 key blocks -0.9%. No gain that holds, so the turns stay behind ``tegula.ws_pingpong``.
WS_PINGPONG_MAX_BLOCKS = 0


@dataclasses.dataclass(frozen=True)
class Turns:
    """The turns of ``warpgroups`` consumer warpgroups (threads 0 .. 128 * warpgroups - 1)."""

    warpgroups: int

    def _wg(self) -> E.Expr:
        return E.binary("floordiv", E.Builtin("thread_idx", (), dt.int32), E.const(WARPGROUP))

    def _call(self, name: str, bid: E.Expr) -> Stmt:
        return Evaluate(E.Builtin(name, (bid, E.const(2 * WARPGROUP)), dt.bool_))

    def take(self) -> Stmt:
        """Wait for this warpgroup's turn (``bar.sync``), before it issues its gemms."""
        return self._call("tl::named_barrier_sync", E.const(PINGPONG_BARRIER) + self._wg())

    def give(self) -> Stmt:
        """Hand the turn to the next warpgroup (``bar.arrive``), once its gemms are issued."""
        nxt = E.binary("floormod", self._wg() + 1, E.const(self.warpgroups))
        return self._call("tl::named_barrier_arrive", E.const(PINGPONG_BARRIER) + nxt)

    def start(self) -> Stmt:
        """Before the loop: the last warpgroup gives warpgroup 0 the first turn."""
        return IfThenElse(E.compare("eq", self._wg(), self.warpgroups - 1),
                          self._call("tl::named_barrier_arrive", E.const(PINGPONG_BARRIER)))

    def end(self) -> Stmt:
        """After everything: warpgroup 0 takes the turn the last warpgroup gave last."""
        return IfThenElse(E.compare("eq", self._wg(), 0),
                          self._call("tl::named_barrier_sync", E.const(PINGPONG_BARRIER)))


def turns_for(consumer_threads: int, trip_count: Any, force: Optional[bool]) -> Optional[Turns]:
    """The turns of an attention loop of ``trip_count`` key blocks (an int, or an expression when
    it is known only at run time) split into the softmax overlap's schedule with
    ``consumer_threads`` consumers, or None: two or more consumer warpgroups, and ``force``
    (``tegula.ws_pingpong``) when set, else a trip count of at most :data:`WS_PINGPONG_MAX_BLOCKS`."""
    w = consumer_threads // WARPGROUP
    if w < 2 or consumer_threads % WARPGROUP:
        return None
    if force is not None:
        return Turns(w) if force else None
    n = trip_count.value if isinstance(trip_count, E.Const) else trip_count
    return Turns(w) if isinstance(n, int) and n <= WS_PINGPONG_MAX_BLOCKS else None
