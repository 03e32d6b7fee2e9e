"""Check that every kernel fits the target: shared memory per block and threads per block.

Runs on the lowered kernel, where every shared buffer (pipeline stages, staging copies and
reduction scratch included) is allocated; the static shared arrays of header builtins
(:data:`STATIC_SMEM`) count too. Too much of either is a user error that names the
buffers and their sizes and says what to shrink; nothing is compiled.
"""
from __future__ import annotations

from typing import Any

from tegula.ir.annotations import CLUSTER, SMEM_BYTES
from tegula.errors import ResourceError, UnsupportedError
from tegula.ir.expr import Builtin
from tegula.ir.stmt import AttrStmt, Kernel, PrimFunc
from tegula.ir.visitor import Visitor
from tegula.backends.cuda.machine import MAX_THREADS_PER_BLOCK, align, smem_limit



def kernel_smem(k: Kernel) -> list[tuple[str, tuple, str, int]]:
    """(name, shape, dtype, bytes) of each shared buffer a lowered kernel allocates."""
    shapes = k.annotations.get("shared_shapes", {})  # the tile shapes, before flattening
    out = []
    for b in k.allocs:
        if b.is_shared:
            out.append((b.name, tuple(shapes.get(b.name, b.shape)), b.dtype.name, b.nbytes()))
    return out


# thread-level builtins that only sm_90 and later have, with the primitive a user wrote
SM90_ONLY = {"tl::mbarrier_expect_tx": "T.mbarrier_expect_tx",
             "tl::mbarrier_arrive_expect_tx": "T.mbarrier_arrive with a transaction count",
             "tl::pdl_trigger": "T.pdl_trigger", "tl::pdl_sync": "T.pdl_sync"}
# the same, for calls the interpreter runs as their plain meaning (nothing, or an ordinary copy
# under AttrStmt("hopper_only", primitive)) but a GPU build for an older arch cannot
SM90_PLAIN = {"tl::warpgroup_reg_alloc": "T.set_max_nreg", "tl::warpgroup_reg_dealloc": "T.set_max_nreg",
              "tl::fence_proxy_async": "T.fence_proxy_async",
              "tl::wgmma_wait_group": "T.wait_wgmma"}


# static ``__shared__`` bytes the device headers declare inside these builtins (one array per
# kernel that calls them), which count against the block's shared memory beside the planned pool
STATIC_SMEM = {"tl::wgmma_order_after": 128}  # wgmma.h: float sink[32]


def static_smem(k: Kernel) -> dict[str, int]:
    """The static shared bytes of the header builtins kernel ``k`` calls, by builtin."""
    used: dict[str, int] = {}

    class V(Visitor):
        def visit_Builtin(self, e: Builtin) -> None:
            if e.name in STATIC_SMEM:
                used[e.name] = STATIC_SMEM[e.name]
            self.generic_visit(e)

    V().visit(k.body)
    return used


def _cc(arch: str) -> int:
    digits = "".join(c for c in arch if c.isdigit())
    return int(digits) if digits else 80


def check_resources(func: PrimFunc, arch: str = "sm_80", interpret: bool = False) -> PrimFunc:
    """``interpret``: the lowered code runs on the interpreter, where Hopper-only calls keep
    their plain meaning (``SM90_PLAIN``) and shared memory has no size limit (the interpreter
    runs tile-level kernels of any size too)."""
    limit = smem_limit(arch)
    old_arch = _cc(arch) < 90

    def hopper_only(what: str, span: Any) -> UnsupportedError:
        return UnsupportedError(f"{what} needs sm_90 (Hopper) or newer; this kernel is built for "
                                f"{arch}", span, hint="build for cuda:sm_90a (H100, H200), or leave "
                                "the Hopper-only calls out")

    class V(Visitor):
        def visit_Builtin(self, e: Builtin) -> None:
            if old_arch and e.name in SM90_ONLY:
                raise UnsupportedError(f"{SM90_ONLY[e.name]} needs sm_90 (Hopper) or newer; this "
                                       f"kernel is built for {arch}", e.span,
                                       hint="build for cuda:sm_90a, or use T.mbarrier_arrive / "
                                       "T.mbarrier_wait_parity without transaction counts")
            if old_arch and not interpret and e.name in SM90_PLAIN:
                raise hopper_only(SM90_PLAIN[e.name], e.span)
            self.generic_visit(e)

        def visit_AttrStmt(self, a: AttrStmt) -> None:
            if old_arch and not interpret and a.key == "hopper_only":
                raise hopper_only(a.value, a.span)
            self.generic_visit(a)

        def visit_Kernel(self, k: Kernel) -> None:
            if k.num_threads > MAX_THREADS_PER_BLOCK:
                raise ResourceError(f"this kernel asks for {k.num_threads} threads per block; CUDA allows "
                                    f"at most {MAX_THREADS_PER_BLOCK}", k.span, hint="use fewer threads (T.Kernel(..., threads=...))")
            if not interpret:
                check_smem(k)
            if old_arch and not interpret and CLUSTER.get(k.annotations):
                raise hopper_only("T.Kernel(..., cluster_dims=) (thread block clusters)", k.span)
            blackwell = k.annotations.get("blackwell_only")  # (primitive, span): T.alloc_tmem, ...
            if blackwell is not None and not interpret and _cc(arch) < 100:
                raise UnsupportedError(f"{blackwell[0]} needs sm_100 (Blackwell: tensor memory, tcgen05 "
                                       f"MMA); this kernel is built for {arch}, and tegula does not lower "
                                       "Blackwell kernels yet", blackwell[1] or k.span,
                                       hint="run it on target='cpu' (tile semantics), or use T.gemm "
                                       "into a T.alloc_fragment for sm_80 / sm_90a")
            if old_arch:
                self.generic_visit(k)

    def check_smem(k: Kernel) -> None:
        bufs = kernel_smem(k)
        total = SMEM_BYTES.get(k.annotations)
        if total is None:
            total = sum(align(n) for *_, n in bufs)
        static = static_smem(k)
        total += sum(static.values())
        if total > limit:
            lines = ", ".join([f"{name} {list(shape)} {d} = {n} B" for name, shape, d, n in
                               sorted(bufs, key=lambda x: -x[3])] +
                              [f"{name}'s static scratch = {n} B" for name, n in static.items()])
            raise ResourceError(
                f"this kernel needs {total} bytes of shared memory per block but {arch} allows "
                f"{limit}: {lines}", k.span,
                hint="use smaller tiles (block sizes) or fewer pipeline stages (num_stages)")

    V().visit(func)
    return func
