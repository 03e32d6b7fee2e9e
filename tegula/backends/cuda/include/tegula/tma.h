// TMA: bulk tensor copies between global and shared memory (sm_90+).
//
// A load is issued by one thread; its bytes are counted on an mbarrier (announce them with
// mbarrier_arrive_expect_tx), and consumers wait on the barrier. A store reads shared memory
// asynchronously: fence_proxy_async() after writing the tile, tma_store_commit() after issuing,
// tma_store_wait<0>() before overwriting the tile. Coordinates are element indices, innermost
// dimension first. The tensor map is a 128-byte, 64-byte aligned object built on the host
// (cuTensorMapEncodeTiled) and passed as a __grid_constant__ kernel parameter.
#pragma once
#include "common.h"

namespace tl {

/// Opaque TMA descriptor, layout-compatible with the driver's CUtensorMap (any arch may name it).
struct alignas(64) TensorMap {
  unsigned long long opaque[16];
};

#if TL_SM90

/// Prefetch a tensor map into the descriptor cache.
TL_DEVICE void prefetch_tma_descriptor(const TensorMap* desc) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(desc) : "memory");
}

TL_DEVICE void tma_load_1d(void* smem_dst, const TensorMap* desc, uint64_t* bar, int c0) {
  asm volatile(
      "cp.async.bulk.tensor.1d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3}], [%2];\n"
      ::"r"(smem_addr(smem_dst)), "l"(desc), "r"(smem_addr(bar)), "r"(c0) : "memory");
}
TL_DEVICE void tma_load_2d(void* smem_dst, const TensorMap* desc, uint64_t* bar, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4}], [%2];\n"
      ::"r"(smem_addr(smem_dst)), "l"(desc), "r"(smem_addr(bar)), "r"(c0), "r"(c1) : "memory");
}
TL_DEVICE void tma_load_3d(void* smem_dst, const TensorMap* desc, uint64_t* bar, int c0, int c1,
                           int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5}], [%2];\n"
      ::"r"(smem_addr(smem_dst)), "l"(desc), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}
TL_DEVICE void tma_load_4d(void* smem_dst, const TensorMap* desc, uint64_t* bar, int c0, int c1,
                           int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5, %6}], [%2];\n"
      ::"r"(smem_addr(smem_dst)), "l"(desc), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2),
      "r"(c3) : "memory");
}
TL_DEVICE void tma_load_5d(void* smem_dst, const TensorMap* desc, uint64_t* bar, int c0, int c1,
                           int c2, int c3, int c4) {
  asm volatile(
      "cp.async.bulk.tensor.5d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5, %6, %7}], [%2];\n"
      ::"r"(smem_addr(smem_dst)), "l"(desc), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2),
      "r"(c3), "r"(c4) : "memory");
}

/// The loads above with the tensor map given by reference (a __grid_constant__ kernel parameter)
/// and the dimension told by the number of coordinates: what generated code calls.
TL_DEVICE void tma_load(void* dst, const TensorMap& map, uint64_t* bar, int c0) {
  tma_load_1d(dst, &map, bar, c0);
}
TL_DEVICE void tma_load(void* dst, const TensorMap& map, uint64_t* bar, int c0, int c1) {
  tma_load_2d(dst, &map, bar, c0, c1);
}
TL_DEVICE void tma_load(void* dst, const TensorMap& map, uint64_t* bar, int c0, int c1, int c2) {
  tma_load_3d(dst, &map, bar, c0, c1, c2);
}
TL_DEVICE void tma_load(void* dst, const TensorMap& map, uint64_t* bar, int c0, int c1, int c2,
                        int c3) {
  tma_load_4d(dst, &map, bar, c0, c1, c2, c3);
}
TL_DEVICE void tma_load(void* dst, const TensorMap& map, uint64_t* bar, int c0, int c1, int c2,
                        int c3, int c4) {
  tma_load_5d(dst, &map, bar, c0, c1, c2, c3, c4);
}

#if TL_SM90A
/// 2-D load multicast to the CTAs of the cluster whose bit is set in cta_mask (same smem offset).
TL_DEVICE void tma_load_2d_multicast(void* smem_dst, const TensorMap* desc, uint64_t* bar,
                                     unsigned short cta_mask, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%4, %5}], [%2], %3;\n"
      ::"r"(smem_addr(smem_dst)), "l"(desc), "r"(smem_addr(bar)), "h"(cta_mask), "r"(c0), "r"(c1)
      : "memory");
}
/// 3-D load multicast to the CTAs of the cluster whose bit is set in cta_mask (same smem offset).
TL_DEVICE void tma_load_3d_multicast(void* smem_dst, const TensorMap* desc, uint64_t* bar,
                                     unsigned short cta_mask, int c0, int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%4, %5, %6}], [%2], %3;\n"
      ::"r"(smem_addr(smem_dst)), "l"(desc), "r"(smem_addr(bar)), "h"(cta_mask), "r"(c0), "r"(c1),
      "r"(c2) : "memory");
}
/// The multicast loads with the tensor map by reference and the dimension told by the number
/// of coordinates: what generated code calls (the cluster form of tma_load).
TL_DEVICE void tma_load_multicast(void* dst, const TensorMap& map, uint64_t* bar,
                                  unsigned short cta_mask, int c0, int c1) {
  tma_load_2d_multicast(dst, &map, bar, cta_mask, c0, c1);
}
TL_DEVICE void tma_load_multicast(void* dst, const TensorMap& map, uint64_t* bar,
                                  unsigned short cta_mask, int c0, int c1, int c2) {
  tma_load_3d_multicast(dst, &map, bar, cta_mask, c0, c1, c2);
}
#endif  // TL_SM90A

TL_DEVICE void tma_store_1d(const TensorMap* desc, const void* smem_src, int c0) {
  asm volatile("cp.async.bulk.tensor.1d.global.shared::cta.bulk_group [%0, {%2}], [%1];\n"
               ::"l"(desc), "r"(smem_addr(smem_src)), "r"(c0) : "memory");
}
TL_DEVICE void tma_store_2d(const TensorMap* desc, const void* smem_src, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];\n"
               ::"l"(desc), "r"(smem_addr(smem_src)), "r"(c0), "r"(c1) : "memory");
}
TL_DEVICE void tma_store_3d(const TensorMap* desc, const void* smem_src, int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];\n"
               ::"l"(desc), "r"(smem_addr(smem_src)), "r"(c0), "r"(c1), "r"(c2) : "memory");
}
TL_DEVICE void tma_store_4d(const TensorMap* desc, const void* smem_src, int c0, int c1, int c2,
                            int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5}], [%1];\n"
      ::"l"(desc), "r"(smem_addr(smem_src)), "r"(c0), "r"(c1), "r"(c2), "r"(c3) : "memory");
}
TL_DEVICE void tma_store_5d(const TensorMap* desc, const void* smem_src, int c0, int c1, int c2,
                            int c3, int c4) {
  asm volatile(
      "cp.async.bulk.tensor.5d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5, %6}], [%1];\n"
      ::"l"(desc), "r"(smem_addr(smem_src)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4)
      : "memory");
}

/// The stores above with the tensor map given by reference (a __grid_constant__ kernel parameter)
/// and the dimension told by the number of coordinates: what generated code calls.
TL_DEVICE void tma_store(const TensorMap& map, const void* src, int c0) { tma_store_1d(&map, src, c0); }
TL_DEVICE void tma_store(const TensorMap& map, const void* src, int c0, int c1) {
  tma_store_2d(&map, src, c0, c1);
}
TL_DEVICE void tma_store(const TensorMap& map, const void* src, int c0, int c1, int c2) {
  tma_store_3d(&map, src, c0, c1, c2);
}
TL_DEVICE void tma_store(const TensorMap& map, const void* src, int c0, int c1, int c2, int c3) {
  tma_store_4d(&map, src, c0, c1, c2, c3);
}
TL_DEVICE void tma_store(const TensorMap& map, const void* src, int c0, int c1, int c2, int c3,
                         int c4) {
  tma_store_5d(&map, src, c0, c1, c2, c3, c4);
}

/// Close the current group of TMA stores.
TL_DEVICE void tma_store_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
/// Wait until at most N store groups still read shared memory.
template <int N>
TL_DEVICE void tma_store_wait() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}

/// Non-tensor bulk copy of bytes (a multiple of 16, 16-byte aligned) from global to shared,
/// counted on bar.
TL_DEVICE void bulk_load(void* smem_dst, const void* gmem_src, unsigned bytes, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
      ::"r"(smem_addr(smem_dst)), "l"(gmem_src), "r"(bytes), "r"(smem_addr(bar)) : "memory");
}

#endif  // TL_SM90

}  // namespace tl
