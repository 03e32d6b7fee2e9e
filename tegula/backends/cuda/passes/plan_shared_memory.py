"""Plan shared memory: give each shared buffer of a kernel a byte offset, letting buffers whose
lifetimes do not overlap share bytes.

A buffer's lifetime is the span of top-level statements of the kernel body that touch it (a
loop counts as a whole). Two buffers may share bytes only when a top-level barrier separates
the last use of the one from the first use of the other, so no thread can still be reading the
old contents when another writes the new ones. Runs after barrier insertion, which therefore
never has to reason about aliasing. The result goes to ``Kernel.annotations["smem_offsets"]``
(with ``"smem_bytes"``, the total), which codegen follows.

Before/after (a staging copy used before the loop, a pipelined tile after a barrier)::

    scratch: 16384 B   tile: 32768 B            smem_offsets = {scratch: 0, tile: 0}
    (separate offsets: 49152 B)                 smem_bytes = 32768
"""
from __future__ import annotations

from typing import Any

from tegula.errors import UnsupportedError
from tegula.ir.stmt import Kernel, PrimFunc, SeqStmt
from tegula.ir.visitor import Mutator
from tegula.backends.cuda.passes.insert_barriers import _is_sync, accesses

SMEM_ALIGN = 128  # bytes: where every shared buffer starts (codegen, emulator and resource check)


def align(n: int, a: int = SMEM_ALIGN) -> int:
    """``n`` bytes rounded up to ``a`` (default ``SMEM_ALIGN``)."""
    return -(-n // a) * a


def plan_kernel(k: Kernel) -> dict:
    stmts = list(k.body.stmts) if isinstance(k.body, SeqStmt) else [k.body]
    shared = [b for b in k.allocs if b.is_shared]
    first: dict = {}
    last: dict = {}
    syncs = [i for i, s in enumerate(stmts) if _is_sync(s)]
    for i, s in enumerate(stmts):
        r, w = accesses(s)
        for b in r | w:
            first.setdefault(b, i)
            last[b] = i
    placed: list[tuple[int, int, Any]] = []  # (offset, size, buffer)
    offsets: dict = {}
    order = sorted(shared, key=lambda b: (first.get(b, -1), -b.nbytes()))
    aligns = k.annotations.get("smem_align") or {}  # buffers that need more than SMEM_ALIGN
    for b in order:
        size = align(b.nbytes())
        a = max(SMEM_ALIGN, aligns.get(b, SMEM_ALIGN))
        f = first.get(b)

        def separated(a: Any) -> bool:
            if f is None or a not in last:
                return False
            return any(last[a] < s < f for s in syncs)

        blocked = sorted((off, off + sz) for off, sz, a in placed if not separated(a))
        off = 0
        for lo, hi in blocked:
            if off + size <= lo:
                break
            off = max(off, align(hi, a))
        offsets[b] = off
        placed.append((off, size, b))
    return offsets


def smem_layout(k: Kernel) -> tuple[dict[int, int], int]:
    """Byte offset of each shared buffer (``id(buffer)`` -> offset) and the total: the planned
    offsets of ``annotations["smem_offsets"]``, else packed in order at ``SMEM_ALIGN``. What
    codegen carves the dynamic shared memory into, and the emulator's pool."""
    offsets = k.annotations.get("smem_offsets") or {}
    out: dict[int, int] = {}
    total = 0
    cursor = 0
    for b in k.allocs:
        if not b.is_shared:
            continue
        if not b.is_static:
            raise UnsupportedError(f"shared buffer '{b.name}' has a dynamic shape {b.shape}", span=b.span)
        if b in offsets:
            off = int(offsets[b])
        else:
            off = align(cursor)
            cursor = off + b.nbytes()
        out[id(b)] = off
        total = max(total, off + b.nbytes())
    return out, total


def plan_shared_memory(func: PrimFunc) -> PrimFunc:
    class M(Mutator):
        def visit_Kernel(self, k: Kernel) -> Kernel:
            offsets = plan_kernel(k)
            ann = dict(k.annotations)
            ann["smem_offsets"] = offsets
            ann["smem_bytes"] = max((o + b.nbytes() for b, o in offsets.items()), default=0)
            return Kernel(k.grid, k.threads, k.block_vars, k.allocs, k.body, dict(k.alloc_inits), ann,
                          thread_var=k.thread_var, span=k.span)

    return M().visit(func)
