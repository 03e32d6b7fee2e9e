// Barriers: named CTA barriers (all archs), mbarriers, proxy fences and cluster barriers (sm_90+).
//
// An mbarrier is a 64-bit word in shared memory. It completes a phase when its pending arrival
// count reaches zero and its transaction count (bytes announced with expect_tx, delivered by TMA)
// reaches zero; then the phase bit flips. Waiters wait for a phase by its parity (0 or 1).
#pragma once
#include "common.h"

namespace tl {

/// bar.sync on named barrier id (0-15) for num_threads threads (a multiple of 32).
TL_DEVICE void named_barrier_sync(int id, int num_threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(num_threads) : "memory");
}
/// bar.arrive on named barrier id: arrive without waiting (producer side).
TL_DEVICE void named_barrier_arrive(int id, int num_threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(num_threads) : "memory");
}

#if TL_SM90
/// Initialize an mbarrier for arrive_count arrivals per phase. One thread, then fence + sync.
TL_DEVICE void mbarrier_init(uint64_t* bar, unsigned arrive_count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(arrive_count)
               : "memory");
}
/// Arrive once on bar.
TL_DEVICE void mbarrier_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar)) : "memory");
}
/// Arrive on the mbarrier at the same offset in the shared memory of CTA cta_id of the cluster
/// (the default .release.cta semantics: what it publishes are wgmma reads the arriving thread's
/// wait_group retired; a .cluster-scoped release would fence every earlier memory access).
TL_DEVICE void mbarrier_arrive_cluster(uint64_t* bar, unsigned cta_id) {
  asm volatile(
      "{\n.reg .b32 remote;\n"
      "mapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n"
      ::"r"(smem_addr(bar)), "r"(cta_id) : "memory");
}
/// Arrive once and announce tx_bytes more bytes of transactions for the current phase.
TL_DEVICE void mbarrier_arrive_expect_tx(uint64_t* bar, unsigned tx_bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)),
               "r"(tx_bytes) : "memory");
}
/// Announce tx_bytes more bytes without arriving.
TL_DEVICE void mbarrier_expect_tx(uint64_t* bar, unsigned tx_bytes) {
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)),
               "r"(tx_bytes) : "memory");
}
/// True when the phase with the given parity has completed (may block for a while first).
TL_DEVICE bool mbarrier_try_wait(uint64_t* bar, int phase) {
  unsigned done;
  asm volatile(
      "{\n.reg .pred p;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done) : "r"(smem_addr(bar)), "r"(phase) : "memory");
  return done != 0;
}
/// Block until the phase with the given parity has completed.
TL_DEVICE void mbarrier_wait(uint64_t* bar, int phase) {
  asm volatile(
      "{\n.reg .pred p;\n"
      "TL_WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      "@!p bra TL_WAIT;\n}\n"
      ::"r"(smem_addr(bar)), "r"(phase) : "memory");
}
/// Make mbarrier initialization visible to the async proxy and to other CTAs of the cluster.
TL_DEVICE void fence_barrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
/// Order generic-proxy shared-memory accesses before later async-proxy ones (TMA store, wgmma).
TL_DEVICE void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

/// Cluster-wide barrier: every thread of every CTA of the cluster arrives, then waits.
TL_DEVICE void cluster_arrive() { asm volatile("barrier.cluster.arrive.aligned;\n" ::: "memory"); }
TL_DEVICE void cluster_wait() { asm volatile("barrier.cluster.wait.aligned;\n" ::: "memory"); }
TL_DEVICE void cluster_sync() {
  cluster_arrive();
  cluster_wait();
}
/// Rank of this CTA in its cluster.
TL_DEVICE unsigned cluster_cta_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
/// Programmatic dependent launch: the next kernel in the stream may start (griddepcontrol).
TL_DEVICE void pdl_trigger() { asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory"); }
/// Programmatic dependent launch: wait until the previous kernel's memory is visible.
TL_DEVICE void pdl_sync() { asm volatile("griddepcontrol.wait;\n" ::: "memory"); }
#else   // sm_80: the mbarrier subset it has (no transaction counts, no try_wait)
/// No async proxy to publish the barriers to: the block barrier after the inits is enough.
TL_DEVICE void fence_barrier_init() {}
/// Initialize an mbarrier for arrive_count arrivals per phase. One thread, then a block barrier.
TL_DEVICE void mbarrier_init(uint64_t* bar, unsigned arrive_count) {
  asm volatile("mbarrier.init.shared.b64 [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(arrive_count)
               : "memory");
}
/// Arrive once on bar.
TL_DEVICE void mbarrier_arrive(uint64_t* bar) {
  unsigned long long state;
  asm volatile("mbarrier.arrive.shared.b64 %0, [%1];\n" : "=l"(state) : "r"(smem_addr(bar))
               : "memory");
}
/// Block until the phase with the given parity has completed.
TL_DEVICE void mbarrier_wait(uint64_t* bar, int phase) {
  asm volatile(
      "{\n.reg .pred p;\n"
      "TL_WAIT:\n"
      "mbarrier.test_wait.parity.shared.b64 p, [%0], %1;\n"
      "@!p bra TL_WAIT;\n}\n"
      ::"r"(smem_addr(bar)), "r"(phase) : "memory");
}
#endif  // TL_SM90

}  // namespace tl
