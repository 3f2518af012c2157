// ptx_tma.cuh - device wrappers over the sm_90a PTX the Hopper bf16 kernel streams its K/V
// tiles with: shared-memory mbarriers (init, expected transaction bytes, phase wait) and the 4D
// TMA tensor copy into shared memory that completes on such a barrier.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "kernels/common/kv_tensor_map.h"

namespace wideattn::ptx {

// Initialises the mbarrier at shared address `barrier` for `arrivals` arrivals per phase.
__device__ __forceinline__ void mbarrier_init(uint32_t barrier, uint32_t arrivals) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(barrier), "r"(arrivals) : "memory");
}

// Makes initialised mbarriers visible to the other threads and to the async proxy (TMA).
__device__ __forceinline__ void fence_mbarrier_init() {
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

// This thread's arrival on `barrier`, announcing `bytes` of copies that will complete on it.
__device__ __forceinline__ void mbarrier_arrive_expect_bytes(uint32_t barrier, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(barrier), "r"(bytes) : "memory");
}

// Waits until the phase of `barrier` with parity `parity` has completed; its copies are then
// visible to this thread and to the wgmmas it issues.
__device__ __forceinline__ void mbarrier_wait(uint32_t barrier, uint32_t parity) {
    uint32_t done = 0;
    do {
        asm volatile(
            "{\n"
            ".reg .pred complete;\n"
            "mbarrier.try_wait.parity.shared::cta.b64 complete, [%1], %2;\n"
            "selp.u32 %0, 1, 0, complete;\n"
            "}\n"
            : "=r"(done)
            : "r"(barrier), "r"(parity)
            : "memory");
    } while (!done);
}

// Whether the phase of `barrier` with parity `parity` has completed, without waiting; when it
// has, its copies are visible to this thread and to the wgmmas it issues.
__device__ __forceinline__ bool mbarrier_test(uint32_t barrier, uint32_t parity) {
    uint32_t done = 0;
    asm volatile(
        "{\n"
        ".reg .pred complete;\n"
        "mbarrier.test_wait.parity.shared::cta.b64 complete, [%1], %2;\n"
        "selp.u32 %0, 1, 0, complete;\n"
        "}\n"
        : "=r"(done)
        : "r"(barrier), "r"(parity)
        : "memory");
    return done != 0;
}

// Fetches a tensor map (a __grid_constant__ kernel argument) into the descriptor cache.
__device__ __forceinline__ void prefetch_tensor_map(const CUtensorMap* map) {
    asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// Thread 0 of the block fetches a kernel's K and V tensor maps while the block sets up: its first
// copies need the descriptors.
__device__ __forceinline__ void prefetch_kv_tensor_maps(const KvTensorMaps& maps) {
    if (threadIdx.x == 0) {
        prefetch_tensor_map(&maps.k);
        prefetch_tensor_map(&maps.v);
    }
}

// Copies the box of `map` at coordinates (c0, c1, c2, c3) to shared address `destination`
// (laid out and swizzled as the map says); the bytes complete on `barrier`.
__device__ __forceinline__ void tma_load_4d(uint32_t destination, const CUtensorMap* map, int32_t c0, int32_t c1,
                                            int32_t c2, int32_t c3, uint32_t barrier) {
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], "
        "[%6];\n" ::"r"(destination),
        "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(barrier)
        : "memory");
}

}  // namespace wideattn::ptx
