"""The names of TileLang's ``tilelang.language`` that tegula refuses, each with its reason.

TileLang 0.1.15 exports 713 names from ``tilelang.language`` (the list is
``tests/language/tilelang_0_1_15_names.txt``). tegula gives most of them TileLang's meaning; the
rest are in :data:`REFUSED` below, grouped by the reason they have no meaning here. A refused name
exists in ``tegula.language`` (``hasattr(T, name)`` is true, imports of it work) and using it in a
kernel (calling it, reading an attribute of it, annotating a parameter with it) raises an
:class:`~tegula.errors.UnsupportedError` at the user's line that names it and says why::

    tegula.errors.UnsupportedError: T.tvm_stack_alloca is not supported by tegula: a TVM runtime
    ABI intrinsic (packed calls, stacks, workspaces), ...
      --> prog.py:12:13

The test ``tests/language/test_tilelang_surface.py`` checks that every TileLang name is either
defined or refused here, never missing silently.
"""
from __future__ import annotations

from typing import Any

from tegula.errors import UnsupportedError

# reason -> the names it refuses (whitespace-separated); one row per reason
_GROUPS: dict[str, str] = {
    "a construct of TVM's TIR script (blocks, buffer declarations, IR node classes); tegula builds "
    "its IR from tile-level T.* calls and has no TIR script layer": """
        buffer buffer_decl arg func_name func_ret match_buffer sblock block_name_suffix_context init
        where reads writes sblock_attr sblock_alloc_buffer axis Assert While decl_buffer launch_thread
        env_thread buffer_store boolean void var iter_var index_map target buffer_var undef meta_var
        type_annotation Var SizeVar Reduce FloatImm IntImm StringImm Add Sub Mul Div Mod FloorDiv
        FloorMod Min Max EQ NE LT LE GT GE BufferLoad ProducerLoad Ramp Broadcast Shuffle Call
        CallEffectKind bind Let IterVar CommReducer Range PrimExpr Any Ptr broadcast ramp vscale
        get_active_lane_mask ignore_loop_partition lookup_param likely ret
        """,
    "a TVM runtime ABI intrinsic (packed calls, argument stacks, workspaces, profiling hooks); "
    "tegula launches kernels itself and its kernels make no calls into a TVM runtime": """
        tvm_access_ptr tvm_throw_last_error tvm_stack_alloca tvm_stack_make_shape tvm_stack_make_array
        call_packed call_cpacked call_packed_lowered call_cpacked_lowered call_intrin call_llvm_intrin
        call_llvm_pure_intrin call_pure_extern tvm_tuple handle_add_byte_offset tvm_struct_set
        tvm_struct_get tvm_thread_invariant tvm_call_packed tvm_call_cpacked tvm_call_packed_lowered
        tvm_call_cpacked_lowered TVMBackendAllocWorkspace TVMBackendFreeWorkspace
        start_profile_intrinsic end_profile_intrinsic anylist_getitem anylist_resetitem
        anylist_setitem_call_packed anylist_setitem_call_cpacked llvm_lookup_intrinsic_id isnullptr
        q_multiply_shift q_multiply_shift_per_axis call_kernel
        """,
    "a raw PTX / WMMA instruction wrapper over addresses and registers; tegula's tile ops "
    "(T.copy, T.gemm, T.Pipelined, T.alloc_barrier) generate these instructions themselves": """
        tvm_load_matrix_sync tvm_mma_sync tvm_bmma_sync tvm_fill_fragment tvm_store_matrix_sync
        tvm_storage_sync tvm_warp_shuffle tvm_warp_shuffle_up tvm_warp_shuffle_down tvm_warp_activemask
        ptx_cp_async ptx_wait_group ptx_commit_group ptx_cp_async_barrier ptx_init_barrier_thread_count
        ptx_arrive_barrier ptx_arrive_barrier_expect_tx create_barriers vectorlow vectorhigh
        vectorcombine ptx_cp_async_bulk ptx_ldmatrix ptx_mma ptx_mma_sp ptx_wgmma_rs ptx_wgmma_sp_rs
        ptx_wgmma_sp_ss ptx_wgmma_ss ptx_mma_sm70 mma_fill mma_store ptx_fence_barrier_init
        ptx_mma_block_scale ptx_wait_barrier cp_async_barrier_noinc ldg128 ldg256 ldg32 ldg64 lds128
        lds32 lds64 stg128 stg256 stg32 stg64 sts128 sts32 sts64 ptx_arrive_cluster_barrier
        wgmma_mma wgmma_gemm_sp warpgroup_arrive warpgroup_commit_batch warpgroup_wait
        alloc_wgmma_desc alloc_descriptor compute_gmma_descriptor initialize_wgmma_descriptor
        increase_descriptor_offset create_tma_descriptor tma_load tma_store_arrive tma_store_wait
        tma_gather4 tma_gather4_bytes tma_scatter4 mbarrier_arrive_expect_tx match_all_sync
        match_any_sync activemask __ffs __fns extract_lane
        """,
    "TileLang's instruction emitter classes and layout helpers for hand-written MMA code; tegula's "
    "own is tegula.language.mma_emitter (TensorCoreIntrinEmitter-style ldmatrix/mma for sm_80)": """
        SparseTensorCoreIntrinEmitter TCGEN05DescriptorParams TCGEN05TensorCoreIntrinEmitter
        TensorCoreIntrinEmitter TensorCoreIntrinEmitterSM120 TensorCoreIntrinEmitterWithLadderTransform
        WGMMADescriptorParams WGMMATensorCoreIntrinEmitter WGSparseTensorCoreIntrinEmitter
        get_ldmatrix_offset get_mma_micro_size get_swizzle_layout make_mma_swizzle_layout
        mma_store_index_map make_blockscaled_gemm_layout
        """,
    "needs sm_100 (Blackwell: tensor memory, tcgen05 MMA, cluster launch control, 2-SM TMA); "
    "tegula does not lower Blackwell kernels yet": """
        deallocate_tmem tcgen05_after_thread_sync tcgen05_before_thread_sync
        tcgen05_cp_warpx4 tcgen05_gemm_blockscaled tcgen05_gemm_sp tcgen05_mma
        tcgen05_mma_blockscaled tcgen05_sf_warp_transpose mma_gemm_blockscaled
        gemm_blockscaled ptx_tcgen05_mma_blockscaled_ss ptx_tcgen05_mma_ss ptx_tcgen05_mma_ts
        alloc_tcgen05_instr_desc alloc_tcgen05_instruction_desc alloc_tcgen05_smem_desc
        compute_umma_descriptor initialize_tcgen05_descriptor clc_try_cancel clc_try_cancel_multicast
        clc_is_canceled clc_get_first_ctaid_x clc_get_first_ctaid_y clc_get_first_ctaid_z
        tma_load_2sm ClusterKernel alloc_cluster_barrier block_rank_in_cluster cluster_arrive_relaxed
        cluster_arrive cluster_wait cluster_sync copy_cluster get_cluster_dims get_cluster_extent
        get_cluster_extents get_cluster_id get_cluster_ids get_cluster_size
        """,
    "TileLang's experimental warp-specialization schedule language (WS roles, ops, syncs); tegula "
    "warp-specializes pipelined loops itself (the WarpSpecialize pass) and offers T.ws for manual "
    "producer/consumer code": """
        WSID WSInstr WSOpRef WSPipeline WSRole WSSchedule WSScope WSSync WSSyncKind ws_op
        annotate_ws_pipeline_depth annotate_ws_schedule WarpSpecialize WarpSpecializeFrame
        """,
    "2:4 structured-sparse tensor-core GEMM (gemm_sp); tegula has no sparse gemm lowering yet": """
        gemm_sp
        """,
    "a vector dtype (TVM's lanes) is not an element type in tegula: a buffer holds scalars; give "
    "the buffer one more dimension of that many elements (tegula vectorizes the accesses)": " ".join(
        f"{base}x{lanes}" for base in ["float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu", "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn", "float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "bfloat16", "tfloat32"]
        for lanes in (2, 4, 8, 16, 32, 64)),
    "an fp8 / fp6 format without an NVIDIA element type (only e4m3, e5m2, e8m0 and fp4 e2m1 have one)":
        """
        float8_e3m4 float8_e4m3b11fnuz float8_e4m3fnuz float8_e5m2fnuz float6_e2m3fn float6_e3m2fn
        float4_e2m1_unpacked
        """,
    "the paired (x2) arithmetic of CUDA's half2/float2 intrinsics; write the two scalar operations, "
    "tegula vectorizes elementwise code itself": """
        add2 sub2 mul2 fma2 max2 min2 abs2
        """,
    "a way into CUDA source or compiled modules written outside tegula (CUDASourceCodeKernel, "
    "TileLang's PrimFunc/JITFunc objects, TVM dtypes)": """
        CUDASourceCodeKernel PrimFunc JITFunc AnyDType get_tvm_dtype KernelLaunchFrame meta_class
        """,
    "a thread leaving the kernel early is not in tegula's IR (the barriers and the emulator's "
    "checks count every thread to the end); guard the rest of the kernel with `if`": """
        thread_return
        """,
    "raw addresses and tensors at addresses or with strides: tegula binds contiguous tensors and "
    "reaches memory through buffers (T.access_ptr, T.make_tensor over a parameter's data)": """
        address_of make_tensor_from_addr StridedTensor
        """,
    "the integer bit-count intrinsics are not in tegula's operator table yet": """
        clz popcount
        """,
    "a helper of TileLang's own frontend (eager builder annotations, let-value frames, fragment "
    "internals, dtype validation); give compile_flags / pass_configs to tegula.jit or "
    "tegula.compile": """
        annotate_compile_flags annotate_pass_configs validate_gemm_ab_dtypes get_let_value
        has_let_value PartialFragment allocate inline reducer_init reducer_update
        """,
    "a user-written persistent tile scheduler; tegula does not take a user's scheduler yet": """
        BaseTileScheduler Persistent PersistentTileScheduler
        """,
    "ordered atomics (load / store with a memory order) and atomic or are not implemented yet; "
    "use T.atomic_add / T.atomic_max / T.atomic_min per element": """
        atomic_load atomic_or atomic_store
        """,
    "not implemented yet (the generic reduce, block-wide votes, 2-d convolution im2col, "
    "TileLang's Philox generator)": """
        reduce syncthreads_and syncthreads_count syncthreads_or
        c2d_im2col rng_init rng_rand rng_rand_float
        """,
    "the grid-wide barrier needs a cooperative launch, which tegula's launcher does not make": """
        sync_grid
        """,
}

REFUSED: dict[str, str] = {name: reason for reason, names in _GROUPS.items() for name in names.split()}


class Refused:
    """A TileLang name tegula has no meaning for: any use raises ``UnsupportedError`` naming it."""

    __slots__ = ("_name", "_reason")

    def __init__(self, name: str, reason: str):
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_reason", reason)

    def error(self) -> UnsupportedError:
        """The error a use of this name raises."""
        return UnsupportedError(f"T.{self._name} is not supported by tegula: {self._reason}",
                                hint=f"T.{self._name} is TileLang API without a meaning in tegula "
                                     "(docs/conformance.md lists these names)")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise self.error()

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise self.error()

    def __getitem__(self, key: Any) -> Any:
        raise self.error()

    def __enter__(self) -> Any:
        raise self.error()

    def __exit__(self, *a: object) -> None:  # pragma: no cover - never entered
        pass

    def __repr__(self) -> str:
        return f"<T.{self._name}: not supported by tegula>"


def refused(name: str) -> Refused:
    """The placeholder of a refused TileLang name (KeyError if ``name`` is not refused)."""
    return Refused(name, REFUSED[name])
