// ptx_cluster.cuh - device wrappers over the sm_90a PTX of thread-block clusters that the
// two-CTA Hopper kernels (kernels/hopper/bf16c2_d512, kernels/hopper/bf16c2p_d512) use: the CTA's
// rank in its cluster, a shared address mapped into another CTA of the cluster, stores into that
// CTA's shared memory that complete on one of its mbarriers (st.async), the cluster-scope mbarrier
// waits (acquiring, or relaxed where no data is published) and plain arrival, the cluster barrier,
// and the per-warpgroup register reallocation (setmaxnreg).
#pragma once

#include <cstdint>

namespace wideattn::ptx {

// This CTA's rank in its cluster (0 .. cluster size - 1).
__device__ __forceinline__ uint32_t cluster_cta_rank() {
    uint32_t rank;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
    return rank;
}

// The shared::cluster address of shared::cta address `address` in the CTA of rank `rank`.
__device__ __forceinline__ uint32_t map_shared_rank(uint32_t address, uint32_t rank) {
    uint32_t mapped;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(mapped) : "r"(address), "r"(rank));
    return mapped;
}

// Stores four floats at `remote` (a shared::cluster address from map_shared_rank) and counts
// their 16 bytes on the mbarrier at `remote_barrier` (in the same CTA as `remote`) as completed
// transaction bytes. The store is weak: the receiving CTA reads the data after observing the
// barrier's phase complete (mbarrier_wait_cluster).
__device__ __forceinline__ void st_async_f32x4(uint32_t remote, float x, float y, float z, float w,
                                               uint32_t remote_barrier) {
    asm volatile(
        "st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, [%5];\n" ::"r"(remote),
        "r"(__float_as_uint(x)), "r"(__float_as_uint(y)), "r"(__float_as_uint(z)), "r"(__float_as_uint(w)),
        "r"(remote_barrier)
        : "memory");
}

// st_async_f32x4 for four 32-bit words (16 bytes) and for two (8 bytes).
__device__ __forceinline__ void st_async_u32x4(uint32_t remote, uint32_t x, uint32_t y, uint32_t z, uint32_t w,
                                               uint32_t remote_barrier) {
    asm volatile(
        "st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, [%5];\n" ::"r"(remote),
        "r"(x), "r"(y), "r"(z), "r"(w), "r"(remote_barrier)
        : "memory");
}

__device__ __forceinline__ void st_async_u32x2(uint32_t remote, uint32_t x, uint32_t y, uint32_t remote_barrier) {
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.b32 [%0], {%1, %2}, [%3];\n" ::"r"(remote),
                 "r"(x), "r"(y), "r"(remote_barrier)
                 : "memory");
}

// st_async_f32x4 for one 32-bit word (4 bytes).
__device__ __forceinline__ void st_async_u32(uint32_t remote, uint32_t x, uint32_t remote_barrier) {
    asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];\n" ::"r"(remote), "r"(x),
                 "r"(remote_barrier)
                 : "memory");
}

// One try of the wait below: whether the phase of the local mbarrier `barrier` with parity
// `parity` has completed, observed with acquire (kAcquire) or relaxed semantics at cluster scope.
template <bool kAcquire>
__device__ __forceinline__ bool mbarrier_try_wait_cluster(uint32_t barrier, uint32_t parity) {
    uint32_t done;
    if constexpr (kAcquire)
        asm volatile(
            "{\n.reg .pred complete;\n"
            "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 complete, [%1], %2;\n"
            "selp.u32 %0, 1, 0, complete;\n}\n"
            : "=r"(done)
            : "r"(barrier), "r"(parity)
            : "memory");
    else
        asm volatile(
            "{\n.reg .pred complete;\n"
            "mbarrier.try_wait.parity.relaxed.cluster.shared::cta.b64 complete, [%1], %2;\n"
            "selp.u32 %0, 1, 0, complete;\n}\n"
            : "=r"(done)
            : "r"(barrier), "r"(parity)
            : "memory");
    return done != 0;
}

// Waits until the phase of the local mbarrier `barrier` with parity `parity` has completed, with
// acquire semantics at cluster scope: writes another CTA of the cluster made complete on it
// (st.async) are visible to this thread past the wait.
__device__ __forceinline__ void mbarrier_wait_cluster(uint32_t barrier, uint32_t parity) {
    while (!mbarrier_try_wait_cluster<true>(barrier, parity)) {
    }
}

// mbarrier_wait_cluster without the acquire: for a phase that publishes no data (a flow-control
// signal), so no cache invalidation follows the wait.
__device__ __forceinline__ void mbarrier_wait_cluster_relaxed(uint32_t barrier, uint32_t parity) {
    while (!mbarrier_try_wait_cluster<false>(barrier, parity)) {
    }
}

// One arrival on the local mbarrier `barrier` (release at CTA scope: this thread's earlier reads
// and writes of shared memory happen before the phase it helps complete).
__device__ __forceinline__ void mbarrier_arrive(uint32_t barrier) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(barrier) : "memory");
}

// Every thread of every CTA of the cluster meets: release on arrival, acquire on the wait, so
// shared-memory writes and mbarrier initialisations before it are visible cluster-wide after it.
// Executed by all threads of the CTA that have not exited, with the warp converged.
__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
    asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

// The warpgroup's per-thread register budget raised (kRegisters >= the launch's) or lowered;
// executed by all threads of the warpgroup. kRegisters is a multiple of 8 in 24 .. 256.
template <uint32_t kRegisters>
__device__ __forceinline__ void raise_registers() {
    static_assert(kRegisters % 8 == 0 && kRegisters >= 24 && kRegisters <= 256, "setmaxnreg range");
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}

template <uint32_t kRegisters>
__device__ __forceinline__ void lower_registers() {
    static_assert(kRegisters % 8 == 0 && kRegisters >= 24 && kRegisters <= 256, "setmaxnreg range");
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
}

}  // namespace wideattn::ptx
