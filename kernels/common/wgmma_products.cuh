// wgmma_products.cuh - the two matrix products of a Hopper-tier step, issued as wgmma groups
// (committed, not waited for): S = Q K^T over the warpgroup's slabs of Q and K (bf16 k16 or e4m3
// k32 per wgmma, N 32 or, e4m3 only, 64 keys, both operands in shared memory) and O += P V (16-bit P from registers, 16-bit V
// MN-major in shared memory). `Traits` is a kernel's traits (a WgmmaD512BlockTraits).
#pragma once

#include <cstdint>

#include "kernels/common/ptx_wgmma.cuh"
#include "kernels/common/wgmma_layout.h"

namespace wideattn::hopper {

// The loop state the pipelined key loops (wgmma_bf16_d512, wgmma_bf16c2_d512, wgmma_e4m3pv_d512)
// carry between steps: Q K_j+1^T, in flight at the start of step j, and P in two register sets
// used alternately (P_j is read by the P V in flight while P_j+1 is written).
template <class Traits>
struct LoopCarry {
    float s[Traits::kKeyNTiles][4];
    uint32_t prob[2][Traits::kPvSteps][4];
};

// Key tiles whose e4m3 scores run as wgmma m64n64k32 (wgmma_e4m3alt64_d512); others are m64n32.
constexpr int32_t kWideScoreKeys = 64;

// Q K^T issued (committed, not waited for) into s, over the warpgroup's kSlabs 128-byte slabs of
// Q and K in 32-byte steps: bf16 (k16 per wgmma) or, kCodes, e4m3 codes (k32 per wgmma; N = the
// tile's keys, 32 or 64).
template <class Traits, int32_t kSlabs, bool kCodes>
__device__ __forceinline__ void issue_scores_over(uint32_t q_shared, uint32_t k_chunk, int32_t group,
                                                  float (&s)[Traits::kKeyNTiles][4]) {
    ptx::wgmma_fence();
#pragma unroll
    for (int32_t step = 0; step < kSlabs * Traits::kStepsPerSlab; ++step) {
        const ScoreDescriptors d = score_step_descriptors<Traits, kSlabs>(q_shared, k_chunk, group, step);
        if constexpr (kCodes && Traits::kTileKeys == kWideScoreKeys)
            ptx::wgmma_m64n64k32_e4m3_ss(s, d.q, d.k, step > 0 ? 1 : 0);
        else if constexpr (kCodes)
            ptx::wgmma_m64n32k32_e4m3_ss(s, d.q, d.k, step > 0 ? 1 : 0);
        else
            ptx::wgmma_m64n32k16_ss(s, d.q, d.k, step > 0 ? 1 : 0);
    }
    ptx::wgmma_commit();
}

// P V issued (committed, not waited for) into o: bf16 P and V, or (kHalf) fp16.
template <class Traits, bool kHalf>
__device__ __forceinline__ void issue_pv_as(float (&o)[Traits::kDimNTiles][4],
                                            const uint32_t (&prob)[Traits::kPvSteps][4], uint32_t v_chunk,
                                            int32_t group) {
    ptx::wgmma_fence();
#pragma unroll
    for (int32_t kk = 0; kk < Traits::kPvSteps; ++kk) {
        const SmemDescriptor b = pv_step_descriptor<Traits>(v_chunk, group, kk);
        if constexpr (kHalf)
            ptx::wgmma_m64n256k16_f16_rs(o, prob[kk], b);
        else
            ptx::wgmma_m64n256k16_rs(o, prob[kk], b);
    }
    ptx::wgmma_commit();
}

}  // namespace wideattn::hopper
