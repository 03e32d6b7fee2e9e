// Warpgroup MMA (wgmma.mma_async, sm_90a): D[64 x N] (+)= A[64 x K] * B[K x N] over 128 threads.
//
// Usage: wgmma_fence(); wgmma_ss<N, half_t>(...) one or more times; wgmma_commit_group();
// ...; wgmma_wait_group<0>() before reading the accumulator.
//
// Accumulator layout (f32, N/2 floats per thread). Thread l of the warpgroup, w = l / 32 (warp),
// g = (l % 32) / 4, t = l % 4. Register d[4 * j + i], j in [0, N/8), i in [0, 4):
//   row = 16 w + g + 8 * (i / 2)        col = 8 j + 2 t + (i % 2)
// i.e. each warp owns 16 rows, and each 8-column slice has the mma.sync m16n8 C layout.
// A from registers (wgmma_rs): each warp holds rows 16 w .. 16 w + 15 of the 64 x 16 A tile in the
// mma.sync m16n8k16 A layout (4 registers of 2 x 16-bit).
//
// A and B in shared memory are given by 64-bit matrix descriptors (make_smem_desc). The tiles are
// built of "core matrices" of 8 rows x 16 bytes; for K-major operands (the default, no transpose)
// the leading byte offset (LBO) is the distance between core matrices along K and the stride byte
// offset (SBO) the distance between core matrices along M/N. With a 128B/64B/32B swizzle, the
// operand rows are 128/64/32 bytes wide, SBO is 8 rows of that (1024/512/256 bytes) and LBO is
// unused for K-major (set it to 1). Swizzled tiles must be aligned to the swizzle's repeat
// (1024/512/256 bytes) unless base_offset says otherwise.
#pragma once
#include "common.h"

#if TL_SM90A
#include "wgmma_ops.h"

namespace tl {

enum class Swizzle : int { kNone = 0, k128B = 1, k64B = 2, k32B = 3 };

/// Build a wgmma shared-memory matrix descriptor.
///   bits  0-13: start address >> 4       bits 16-29: leading byte offset >> 4
///   bits 32-45: stride byte offset >> 4  bits 49-51: base offset   bits 62-63: swizzle mode
TL_DEVICE uint64_t make_smem_desc(const void* smem, int leading_byte_offset, int stride_byte_offset,
                                  Swizzle swizzle, int base_offset = 0) {
  uint64_t desc = 0;
  desc |= static_cast<uint64_t>((smem_addr(smem) >> 4) & 0x3fff);
  desc |= static_cast<uint64_t>((leading_byte_offset >> 4) & 0x3fff) << 16;
  desc |= static_cast<uint64_t>((stride_byte_offset >> 4) & 0x3fff) << 32;
  desc |= static_cast<uint64_t>(base_offset & 0x7) << 49;
  desc |= static_cast<uint64_t>(static_cast<int>(swizzle) & 0x3) << 62;
  return desc;
}

/// make_smem_desc with the swizzle mode as a template argument (1: 128B, 2: 64B, 3: 32B, 0: none),
/// the form generated code calls.
template <int Mode>
TL_DEVICE uint64_t wgmma_desc(const void* smem, int leading_byte_offset, int stride_byte_offset) {
  return make_smem_desc(smem, leading_byte_offset, stride_byte_offset, static_cast<Swizzle>(Mode));
}

/// Advance a descriptor's start address by byte_offset (a multiple of 16), e.g. to step along K.
TL_DEVICE uint64_t desc_add_offset(uint64_t desc, int byte_offset) {
  return desc + static_cast<uint64_t>(byte_offset >> 4);
}

/// Order register / shared-memory accesses before the following wgmma (wgmma.fence).
TL_DEVICE void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
/// Close the current group of wgmma operations.
TL_DEVICE void wgmma_commit_group() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
/// Wait until at most N wgmma groups are pending.
template <int N>
TL_DEVICE void wgmma_wait_group() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
/// Keep the compiler from moving accesses to an accumulator register across wgmma boundaries.
TL_DEVICE void wgmma_fence_operand(float& r) { asm volatile("" : "+f"(r)::"memory"); }
/// A volatile shared-memory store of v: the next wgmma.wait_group cannot be scheduled above it,
/// so the code computing v runs while the wgmma groups being waited for are still in flight.
TL_DEVICE void wgmma_order_after(float v) {
  __shared__ float sink[32];
  *reinterpret_cast<volatile float*>(&sink[threadIdx.x & 31]) = v;
}
TL_DEVICE void wgmma_fence_operand(unsigned& r) { asm volatile("" : "+r"(r)::"memory"); }
/// Count registers: accumulators (float), or 16-bit A operands of wgmma_rs as 32-bit words, which
/// must stay in their registers until the wgmma reading them is retired.
template <int Count, class R>
TL_DEVICE void wgmma_fence_operands(R* r) {
#pragma unroll
  for (int i = 0; i < Count; ++i) wgmma_fence_operand(r[i]);
}

#define TL_WGMMA_DISPATCH_N(FORM, ...)                                           \
  if constexpr (N == 8) { FORM##_N8(__VA_ARGS__); }                              \
  else if constexpr (N == 16) { FORM##_N16(__VA_ARGS__); }                       \
  else if constexpr (N == 24) { FORM##_N24(__VA_ARGS__); }                       \
  else if constexpr (N == 32) { FORM##_N32(__VA_ARGS__); }                       \
  else if constexpr (N == 48) { FORM##_N48(__VA_ARGS__); }                       \
  else if constexpr (N == 64) { FORM##_N64(__VA_ARGS__); }                       \
  else if constexpr (N == 96) { FORM##_N96(__VA_ARGS__); }                       \
  else if constexpr (N == 128) { FORM##_N128(__VA_ARGS__); }                     \
  else if constexpr (N == 192) { FORM##_N192(__VA_ARGS__); }                     \
  else if constexpr (N == 256) { FORM##_N256(__VA_ARGS__); }                     \
  else { static_assert(N == 0, "wgmma: N must be one of 8 16 24 32 48 64 96 128 192 256"); }

/// D[64 x N] = A * B + (scale_d ? D : 0), A and B (half_t or bfloat16_t) from shared memory.
/// d holds N / 2 floats per thread. TransA / TransB select MN-major A / B (default K-major).
template <int N, class AB, bool TransA = false, bool TransB = false>
TL_DEVICE void wgmma_ss(float* d, uint64_t desc_a, uint64_t desc_b, int scale_d = 1) {
  static_assert(is_same<AB, half_t>::value || is_same<AB, bfloat16_t>::value,
                "wgmma_ss: inputs must be half_t or bfloat16_t (use wgmma_ss_fp8 for fp8)");
  if constexpr (is_same<AB, half_t>::value) {
    TL_WGMMA_DISPATCH_N(TL_WGMMA_SS, "f16")
  } else {
    TL_WGMMA_DISPATCH_N(TL_WGMMA_SS, "bf16")
  }
}

/// D[64 x N] = A * B + (scale_d ? D : 0), A from registers (4 x b32 per thread), B from shared.
template <int N, class AB, bool TransB = false>
TL_DEVICE void wgmma_rs(float* d, const unsigned* a, uint64_t desc_b, int scale_d = 1) {
  static_assert(is_same<AB, half_t>::value || is_same<AB, bfloat16_t>::value,
                "wgmma_rs: inputs must be half_t or bfloat16_t");
  if constexpr (is_same<AB, half_t>::value) {
    TL_WGMMA_DISPATCH_N(TL_WGMMA_RS, "f16")
  } else {
    TL_WGMMA_DISPATCH_N(TL_WGMMA_RS, "bf16")
  }
}

/// fp8 wgmma, K = 32: A and B (fp8_e4_t / fp8_e5_t) K-major in shared memory, f32 accumulate.
template <int N, class A, class B>
TL_DEVICE void wgmma_ss_fp8(float* d, uint64_t desc_a, uint64_t desc_b, int scale_d = 1) {
  constexpr bool a5 = is_same<A, fp8_e5_t>::value, b5 = is_same<B, fp8_e5_t>::value;
  static_assert((a5 || is_same<A, fp8_e4_t>::value) && (b5 || is_same<B, fp8_e4_t>::value),
                "wgmma_ss_fp8: inputs must be fp8_e4_t or fp8_e5_t");
  if constexpr (!a5 && !b5) {
    TL_WGMMA_DISPATCH_N(TL_WGMMA_SS_FP8, "e4m3", "e4m3")
  } else if constexpr (!a5 && b5) {
    TL_WGMMA_DISPATCH_N(TL_WGMMA_SS_FP8, "e4m3", "e5m2")
  } else if constexpr (a5 && !b5) {
    TL_WGMMA_DISPATCH_N(TL_WGMMA_SS_FP8, "e5m2", "e4m3")
  } else {
    TL_WGMMA_DISPATCH_N(TL_WGMMA_SS_FP8, "e5m2", "e5m2")
  }
}
#undef TL_WGMMA_DISPATCH_N

/// Raise (Inc) or lower the per-thread register budget of this warpgroup (setmaxnreg, sm_90a);
/// Regs is a multiple of 8 in [24, 256]. Used by warp-specialized kernels.
template <int Regs>
TL_DEVICE void warpgroup_reg_alloc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(Regs));
}
template <int Regs>
TL_DEVICE void warpgroup_reg_dealloc() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(Regs));
}

}  // namespace tl

#endif  // TL_SM90A
