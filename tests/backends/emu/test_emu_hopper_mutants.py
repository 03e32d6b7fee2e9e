"""Mutation test of the Hopper emulator's checks: every barrier wait, arrive, expect_tx, fence,
commit and wait_group of the lowered sm_90a GEMM (TMA and cp.async feeds) and flash attention is
removed (also each named barrier's bar.sync and bar.arrive of the ping-pong form), one at a
time, and the emulator must *report* each mutant as a located tegula error naming a buffer or a
barrier and a line of the kernel (a wrong result alone does not count).

The only mutants allowed to pass are equivalent ones, found from the IR itself: a
``fence.proxy.async`` before a wgmma whose shared operands no generic store ever writes (only the
copy engine fills them, and the mbarrier orders that), which the PTX ISA does not require; those
must still compute the right result. Also equivalent, in a loop keeping one k-tile of wgmma in
flight: a ``wgmma_fence_operands`` right after a ``wait_group`` that leaves the group writing
those registers in flight (not one pinning the registers of a group that wait retired, as the
softmax overlap's pin of G1's result after ``wait_group 1``) (the last k-tile's ``wait_group 0`` pins them again before any read),
and the ``wgmma.fence`` of that last k-tile after the loop (since the loop's groups nothing but
wgmma touched the accumulators, and the PTX ISA orders chained accumulation implicitly).
"""
from __future__ import annotations

import re

import numpy as np
import pytest

from tegula.backends.emu import execute
from tegula.backends.interp import execute as interpret
from tegula.errors import RaceError, SyncError, TegulaError
from tegula.ir import expr as E
from tegula.ir import stmt as S

from emu_util import assert_match, random_args
from hopper_util import KERNELS, Mutate, lowered, sync_statements, without

LINES = {"gemm_tma": "gemm.py:", "gemm_cp_async": "gemm.py:", "flash_attention": "flash_attention.py:",
         "gemm_ws_overlap": "gemm.py:", "flash_attention_overlap": "flash_attention.py:",
         "flash_attention_ws": "flash_attention.py:",
         "gemm_tma_store": "gemm.py:",
         "gemm_ws_tma_store": "gemm.py:", "gemm_cluster": "gemm_util.py:"}


class _Lookahead(Mutate):
    """Also notes, for each fence.proxy.async, the shared buffers the wgmma after it reads."""

    def __init__(self) -> None:
        super().__init__()
        self.ahead: dict = {}
        self.fence_reads: list = []

    def visit(self, node):
        if isinstance(node, S.SeqStmt):
            for i, c in enumerate(node.stmts):
                if isinstance(c, S.Evaluate) and isinstance(c.value, E.Builtin) and \
                        c.value.name == "tl::fence_proxy_async":
                    bufs = set()
                    for d in node.stmts[i + 1:]:
                        if isinstance(d, S.Evaluate) and isinstance(d.value, E.Builtin):
                            if d.value.name == "tl::wgmma_commit_group":
                                break
                            for a in d.value.args:
                                if isinstance(a, E.Builtin) and a.name == "tl::wgmma_desc":
                                    bufs.add(a.args[0].args[0].buffer)
                    self.ahead[id(c)] = bufs
        out = super().visit(node)
        if isinstance(node, S.Evaluate) and isinstance(node.value, E.Builtin) and \
                node.value.name == "tl::fence_proxy_async":
            self.fence_reads.append((len(self.seen) - 1, self.ahead.get(id(node), set())))
        return out


class _Groups(Mutate):
    """Also notes, for each synchronization statement, the accumulators of the wgmma group
    committed last before it (``last_group[i]``)."""

    def __init__(self) -> None:
        super().__init__()
        self.pending: set = set()
        self.committed: set = set()
        self.last_group: list = []

    def visit(self, node):
        if isinstance(node, S.Evaluate) and isinstance(node.value, E.Builtin):
            name = node.value.name
            if name in ("tl::wgmma_ss", "tl::wgmma_rs"):
                self.pending.add(node.value.args[0].args[0].buffer)
            elif name == "tl::wgmma_commit_group":
                self.committed, self.pending = self.pending, set()
        out = super().visit(node)
        while len(self.last_group) < len(self.seen):
            self.last_group.append(self.committed)
        return out


def _generic_writes(low) -> set:
    """Shared buffers some generic store writes (element stores, vector copies, cp.async)."""
    from tegula.ir.visitor import post_order_visit

    out: set = set()

    def visit(n) -> None:
        if isinstance(n, S.BufferStore) and n.buffer.is_shared:
            out.add(n.buffer)
        if isinstance(n, E.Builtin) and n.name in ("tl::copy_vec", "tl::cp_async", "tl::cp_async_zfill"):
            dst = n.args[0]
            if isinstance(dst, E.Builtin) and dst.args and isinstance(dst.args[0], E.BufferLoad) \
                    and dst.args[0].buffer.is_shared:
                out.add(dst.args[0].buffer)
    post_order_visit(low, visit)
    return out


def equivalent_mutants(low) -> set:
    """Indices of the fences before wgmmas whose shared operands share no byte with a buffer a
    generic store writes."""
    la = _Lookahead()
    la.visit(low)
    kernel = [s for s in (low.body.stmts if isinstance(low.body, S.SeqStmt) else (low.body,))][0]
    offs = {b: o for b, o in kernel.annotations["smem_offsets"].items()}

    def extent(b):
        return offs[b], offs[b] + b.numel() * b.dtype.itemsize

    written = [extent(b) for b in _generic_writes(low)]
    stmts = sync_statements(low)
    def in_flight(i):  # the last wait_group before statement i leaves a group in flight
        waits = [j for j in range(i) if stmts[j].value.name == "tl::wgmma_wait_group"]
        return bool(waits) and dict(stmts[waits[-1]].value.attrs)["template"] != (0,)

    groups = _Groups()
    groups.visit(low)

    def pins_in_flight(i):  # the registers it pins are written by the group left in flight
        return stmts[i].value.args[0].args[0].buffer in groups.last_group[i]

    out = {i for i in range(1, len(stmts)) if stmts[i].value.name == "tl::wgmma_fence_operands"
           and stmts[i - 1].value.name == "tl::wgmma_wait_group" and in_flight(i) and pins_in_flight(i)}
    out |= {i for i in range(len(stmts)) if stmts[i].value.name == "tl::wgmma_fence" and in_flight(i)}
    for i, bufs in la.fence_reads:
        if bufs and all(all(hi <= lo2 or hi2 <= lo for lo2, hi2 in written) for lo, hi in map(extent, bufs)):
            out.add(i)
    return out


@pytest.fixture(scope="module")
def cases():
    rng = np.random.default_rng()
    out = {}
    for name in KERNELS:
        f, low = lowered(name)
        args = random_args(f, rng)
        ref = [a.copy() for a in args]
        interpret(f, ref)
        out[name] = (low, args, ref)
    return out


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_every_mutant_is_reported(name, cases):
    low, args, ref = cases[name]
    got = [a.copy() for a in args]
    execute(low, got)                       # the kernel as lowered is clean and right
    assert_match(ref, got, 2e-3, 2e-3)
    stmts = sync_statements(low)
    kinds = {s.value.name for s in stmts}
    need = {"tl::wgmma_fence", "tl::wgmma_wait_group", "sync_threads"}
    if name in ("gemm_cp_async", "flash_attention", "flash_attention_overlap", "flash_attention_ws"):
        need.add("tl::fence_proxy_async")  # generic writes that wgmma reads (TMA-only tiles need none)
    need |= {"tl::cp_async_wait"} if name == "gemm_cp_async" else {"tl::mbarrier_wait", "tl::mbarrier_arrive"}
    if name in ("gemm_tma_store", "gemm_ws_tma_store", "gemm_cluster"):  # the generic writes of the staged tile, then the copy engine's reads
        need |= {"tl::fence_proxy_async", "tl::tma_store_commit", "tl::tma_store_wait"}
    if name == "gemm_cluster":  # the cluster barriers and the remote frees of the peer's stages
        need = (need - {"sync_threads"}) | {"tl::cluster_sync", "tl::mbarrier_arrive_cluster"}
    assert need <= kinds, kinds
    if name in ("gemm_ws_overlap", "gemm_ws_tma_store", "gemm_cluster"):
        assert "# warp_specialize" in low.script()
    equivalent = equivalent_mutants(low)
    survivors, reports = [], {}
    for i, s in enumerate(stmts):
        mutant = without(low, i)
        out = [a.copy() for a in args]
        try:
            execute(mutant, out)
        except (RaceError, SyncError) as e:
            msg = str(e)
            assert LINES[name] in msg, msg
            assert re.search(r"(shared buffer|mbarrier|register|shared memory:) '|named barrier \d+", msg), msg
            reports[i] = msg.splitlines()[0]
            continue
        except TegulaError as e:  # any other located error is a report too, but say which
            raise AssertionError(f"mutant {i} ({s.value.name}) raised {type(e).__name__}: {e}")
        survivors.append(i)
        assert i in equivalent, f"removing #{i} {s.value.name} is not reported:\n{mutant.script()}"
        assert_match(ref, out, 2e-3, 2e-3)  # an equivalent mutant: the result stays right
    assert set(survivors) == equivalent
    assert len(reports) >= len(stmts) - len(equivalent)
    # what each kind of removal is reported as
    by_kind: dict = {}
    for i, first in reports.items():
        by_kind.setdefault(stmts[i].value.name, set()).add(first.split(" on ")[0].split(":")[0])
    if "tl::mbarrier_arrive" in by_kind:
        assert any("deadlock" in k for k in by_kind["tl::mbarrier_arrive"])
    if name == "gemm_cluster":
        # the peer never frees the stage; a block that may leave under its peer's arrives; a use of
        # the barriers before the cluster barrier publishes their initialization
        assert any("deadlock" in k for k in by_kind["tl::mbarrier_arrive_cluster"])
        syncs = [reports[i] for i in reports if stmts[i].value.name == "tl::cluster_sync"]
        assert len(syncs) == 2 and "before its initialization" in syncs[0], syncs
        assert "of the cluster exits while" in syncs[1], syncs
    if name in ("gemm_tma_store", "gemm_ws_tma_store", "gemm_cluster"):
        assert "generic-proxy write read by the async proxy without fence.proxy.async" in by_kind["tl::fence_proxy_async"]
        # the last tile's store outlives the block
        ends = "the block ends while a TMA store may still read"
        assert any(k.startswith(ends) for k in by_kind["tl::tma_store_wait"])
    if "tl::wgmma_wait_group" in by_kind:
        assert by_kind["tl::wgmma_wait_group"] & {"accumulator read before wgmma.wait_group",
                                                  "stage reused before the consumer released it (write after read)"}
