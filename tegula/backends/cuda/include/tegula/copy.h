// Global <-> shared copies: plain vectorized copies and cp.async (sm_80+).
//
// cp.async copies go through the async copy unit without staging in registers. A group of them is
// closed with cp_async_commit(); cp_async_wait<N>() blocks until at most N groups are in flight.
// A __syncthreads() (or another barrier) is still needed before other threads read the data.
#pragma once
#include "common.h"

namespace tl {

namespace detail {
template <int Bytes> struct VecOf;
template <> struct VecOf<1> { typedef unsigned char type; };
template <> struct VecOf<2> { typedef unsigned short type; };
template <> struct VecOf<4> { typedef unsigned type; };
template <> struct VecOf<8> { typedef uint2 type; };
template <> struct VecOf<16> { typedef uint4 type; };
}  // namespace detail

/// Copy Bytes (1, 2, 4, 8 or 16) with one load and one store. Both pointers must be aligned
/// to Bytes. Works for any pair of global / shared / local pointers.
template <int Bytes>
TL_DEVICE void copy_vec(void* dst, const void* src) {
  typedef typename detail::VecOf<Bytes>::type V;
  *reinterpret_cast<V*>(dst) = *reinterpret_cast<const V*>(src);
}

/// 16-byte copy (one uint4); the usual width for global <-> shared.
TL_DEVICE void copy_16B(void* dst, const void* src) { copy_vec<16>(dst, src); }

/// Copy Bytes, or store zeros when pred is false (the source is not read).
template <int Bytes>
TL_DEVICE void copy_vec_pred(void* dst, const void* src, bool pred) {
  typedef typename detail::VecOf<Bytes>::type V;
  V v;
  if (pred) {
    v = *reinterpret_cast<const V*>(src);
  } else {
    v = V{};
  }
  *reinterpret_cast<V*>(dst) = v;
}

/// cp.async.ca (cache at all levels) of Bytes = 4, 8 or 16 from global to shared.
template <int Bytes>
TL_DEVICE void cp_async_ca(void* smem_dst, const void* gmem_src) {
  static_assert(Bytes == 4 || Bytes == 8 || Bytes == 16, "cp.async.ca copies 4, 8 or 16 bytes");
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(smem_addr(smem_dst)),
               "l"(gmem_src), "n"(Bytes) : "memory");
}

/// cp.async.cg (cache in L2 only, bypass L1) of 16 bytes from global to shared.
template <int Bytes = 16>
TL_DEVICE void cp_async_cg(void* smem_dst, const void* gmem_src) {
  static_assert(Bytes == 16, "cp.async.cg copies 16 bytes");
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_addr(smem_dst)),
               "l"(gmem_src) : "memory");
}

/// cp.async with zero fill: copies Bytes when pred is true, otherwise writes Bytes zeros to shared
/// memory without reading global memory (src-size operand = 0). gmem_src must still be a valid
/// address expression but is not dereferenced when pred is false.
template <int Bytes>
TL_DEVICE void cp_async_zfill(void* smem_dst, const void* gmem_src, bool pred) {
  static_assert(Bytes == 4 || Bytes == 8 || Bytes == 16, "cp.async copies 4, 8 or 16 bytes");
  const int src_size = pred ? Bytes : 0;
  if constexpr (Bytes == 16) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(smem_dst)),
                 "l"(gmem_src), "r"(src_size) : "memory");
  } else {
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(smem_addr(smem_dst)),
                 "l"(gmem_src), "n"(Bytes), "r"(src_size) : "memory");
  }
}

/// cp.async of Bytes (4, 8, 16): .cg for 16 bytes, .ca otherwise. The default used by codegen.
template <int Bytes>
TL_DEVICE void cp_async(void* smem_dst, const void* gmem_src) {
  if constexpr (Bytes == 16) {
    cp_async_cg<16>(smem_dst, gmem_src);
  } else {
    cp_async_ca<Bytes>(smem_dst, gmem_src);
  }
}

/// Close the current group of cp.async operations.
TL_DEVICE void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

/// Wait until at most N committed cp.async groups are still pending (N = 0: all done).
template <int N>
TL_DEVICE void cp_async_wait() {
  if constexpr (N == 0) {
    asm volatile("cp.async.wait_all;\n" ::: "memory");
  } else {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
  }
}

}  // namespace tl
