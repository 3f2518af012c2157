// wgmma_peak.cuh - the body of the sm_90a wgmma rate probes (wgmma_peak_e4m3.cu,
// wgmma_peak_bf16.cu): two warpgroups per block, one block per SM, each issuing back-to-back
// m64n256 wgmmas with A (its own 64 rows) and B (256 rows, shared by both) K-major in 128-byte
// swizzled shared memory, fenced, committed and waited on as the Hopper-tier kernels do. Shared
// memory holds a fixed pseudo-random pattern of finite values of magnitude [0.5, 2) with random
// signs (never zeros), and every accumulator is summed into a stored value, so nothing is dead.
#pragma once

#include <cstdint>

#include "kernels/common/ptx_wgmma.cuh"
#include "kernels/common/wgmma_layout.h"
#include "tools/bench/probe_shapes.h"

namespace wideattn::probe {

constexpr uint32_t kPatternMultiplier = 0x9E3779B1u;  // Fibonacci hashing of the word index

__device__ __forceinline__ uint32_t pattern_hash(uint32_t index) {
    const uint32_t h = index * kPatternMultiplier;
    return h ^ (h >> 15);
}

// Runs the probe loop of `Op` (mma: one wgmma on descriptors; pattern: a shared word from a
// hash, every element finite and non-zero) for `iterations` commit groups, then stores each
// thread's accumulator sum to out[global thread].
template <class Op>
__device__ __forceinline__ void wgmma_peak_body(float* out, int32_t iterations) {
    __shared__ __align__(1024) uint32_t operands[kWgmmaSharedBytes / sizeof(uint32_t)];
    for (int w = threadIdx.x; w < kWgmmaSharedBytes / static_cast<int>(sizeof(uint32_t)); w += kWgmmaThreads)
        operands[w] = Op::pattern(pattern_hash(w));
    ptx::fence_proxy_async_shared();
    __syncthreads();
    const int group = threadIdx.x / kWarpgroupThreads;
    const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(operands));
    const hopper::SmemDescriptor a_desc =
        hopper::swizzle128_descriptor(base + group * kWgmmaABytes, kWgmmaVecBytes, kWgmmaAtomBytes);
    const hopper::SmemDescriptor b_desc =
        hopper::swizzle128_descriptor(base + kWgmmaWarpgroups * kWgmmaABytes, kWgmmaVecBytes, kWgmmaAtomBytes);
    float acc[32][4] = {};
    for (int32_t it = 0; it < iterations; ++it) {
        ptx::wgmma_fence();
#pragma unroll
        for (int step = 0; step < kWgmmaStepsPerGroup; ++step)
            Op::mma(acc, hopper::descriptor_plus(a_desc, step * kWgmmaStepBytes),
                    hopper::descriptor_plus(b_desc, step * kWgmmaStepBytes));
        ptx::wgmma_commit();
        ptx::wgmma_wait<1>();
    }
    ptx::wgmma_wait<0>();
    ptx::pin_all(acc);
    float sum = 0.0f;
#pragma unroll
    for (int q = 0; q < 32; ++q) sum += acc[q][0] + acc[q][1] + acc[q][2] + acc[q][3];
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}

}  // namespace wideattn::probe
