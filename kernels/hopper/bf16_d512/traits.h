// traits.h - every compile-time constant of the Hopper-tier BF16 prefill kernel for head dim 512
// and GQA group 8 (kernel wideattn_wgmma_bf16_d512, sm_90a only). Read by the kernel sources and
// by the manifest generator.
//
// Block layout, wgmma shapes, swizzle and score exchange: kernels/common/wgmma_block_traits.h,
// shared with the 8-bit Hopper kernel. Here: Q, K and V are bf16; S = Q K^T runs as wgmma
// m64n32k16 over the warpgroup's 256 dims; each warpgroup loads its own half of Q (cp.async) and
// of K and V (TMA issued by lane 0 of each of its warps, completion on mbarriers), so only the
// score exchange couples the two.
#pragma once

#include "kernels/common/kernel_desc.h"
#include "kernels/common/wgmma_block_traits.h"

namespace wideattn {

struct WgmmaBf16D512Traits : WgmmaD512BlockTraits {
    // Softmax rescale whenever a row maximum grows (threshold 0, as the mma tier): the largest P
    // of a row is exactly 1. A lazy threshold of 8 (P up to 2^8 before a rescale) cost mean abs
    // error 1.19x and max abs error 1.87x the tuned Triton peer's on Gemma-like peaked inputs;
    // 0 gives 1.00x (H200, 2026-12-01; the costs and the variants measured: kernels/hopper/NOTES.md).
    static constexpr float kRescaleThresholdLog2 = 0.0f;

    // Score wgmma m64n32k16 on bf16.
    static constexpr int32_t kWgmmaK = 16;
    static constexpr int32_t kQkSteps = kDimsPerGroup / kWgmmaK;  // score wgmmas per step

    // bf16 operands: 64 dims per 128-byte slab.
    static constexpr int32_t kElemBytes = 2;
    static constexpr int32_t kVecElems = kVecBytes / kElemBytes;
    static constexpr int32_t kSlabDims = kSwizzleBytes / kElemBytes;
    static constexpr int32_t kSlabsPerGroup = kDimsPerGroup / kSlabDims;
    static constexpr int32_t kVecsPerGroupRow = kDimsPerGroup / kVecElems;

    // Shared memory: Q, a ring of K/V chunks (one chunk = the K or the V of one key tile), the
    // score exchange, and the ring's mbarriers.
    static constexpr int32_t kQBytes = kRowsPerBlock * kHeadDim * kElemBytes;
    static constexpr int32_t kChunkBytes = kTileKeys * kHeadDim * kElemBytes;
    static constexpr int32_t kRingSlots = 4;  // K_j, V_j, K_j+1, V_j+1 (schedule in mainloop.cuh)
    // K/V tiles arrive by TMA: one mbarrier per ring slot and warpgroup completes when the
    // warpgroup's half of the chunk (kGroupChunkBytes) has landed.
    static constexpr int32_t kGroupChunkBytes = kChunkBytes / kWarpGroups;
    static constexpr int32_t kBarrierBytes = 8;
    static constexpr int32_t kBarriersBytes = kRingSlots * kWarpGroups * kBarrierBytes;
    // Shared memory plan (byte offsets from the dynamic shared memory base rounded up to
    // kSmemAlign, which the allocation leaves room for).
    struct SmemPlan {
        static constexpr int32_t kQ = 0;
        static constexpr int32_t kRing = kQ + kQBytes;
        static constexpr int32_t kExchange = kRing + kRingSlots * kChunkBytes;
        static constexpr int32_t kBarriers = kExchange + kExchangeBytes;
        static constexpr int32_t kEnd = kBarriers + kBarriersBytes;
        static constexpr int32_t kBytes = kEnd + kSmemAlign;
    };
    static constexpr int32_t kSmemBytes = SmemPlan::kBytes;

    static constexpr int32_t kMinSm = 90;  // wgmma, TMA (sm_90a)

    static_assert(kWgmmaK * kElemBytes == kScoreStepBytes, "a score wgmma steps 32 bytes of a row");
    static_assert(kSlabsPerGroup * kStepsPerSlab == kQkSteps, "bf16 score steps");
    static_assert(kElemBytes == kValueBytes && kSlabsPerGroup == kValueSlabsPerGroup,
                  "bf16 V is the 16-bit layout P V reads");
    static_assert(kDimsPerGroup % kSlabDims == 0, "a warpgroup's dims are whole 128-byte slabs");
    static_assert(kWarpGroupThreads % kVecsPerGroupRow == 0, "whole rows per load pass");
    static_assert(kSmemBytes <= kSmemLimitSm90, "must fit sm_90 shared memory (227 KB)");

    static constexpr KernelDesc desc = {
        "wgmma_bf16_d512", "wideattn_wgmma_bf16_d512",
        kBF16, kBF16, kBF16,
        kHeadDim, kHeadDim, kHeadDim,
        kGroup, kGroup,
        kTileTokens, kTileKeys, kGroup, kThreads, kSmemBytes, kMinSm,
        "varlen,paged,causal,gqa,lse,tma_kv,split_kv", kKindPrefill, "wideattn_wgmma_bf16_d512_split"};
};

}  // namespace wideattn
