// traits.h - every compile-time constant of the Hopper-tier 8-bit prefill kernel for head dim
// 512, GQA group 8 (kernel wideattn_wgmma_e4m3q_d512, sm_90a only): Q, K and V e4m3 with
// per-tensor scales, Q K^T by wgmma m64n32k32 e4m3 (both operands from shared memory, K in the
// cache's own [key][dim] layout), P V by wgmma m64n256k16 fp16 with V converted from e4m3 to
// fp16 in shared memory (FP8 wgmma takes both operands K-major; fp16 holds every e4m3 value
// exactly). The block layout, the score exchange, the softmax and the epilogue are those of the
// bf16 Hopper kernel, from the base they share (kernels/common/wgmma_block_traits.h).
#pragma once

#include "kernels/common/kernel_desc.h"
#include "kernels/common/wgmma_block_traits.h"

namespace wideattn {

struct WgmmaE4m3QD512Traits : WgmmaD512BlockTraits {
    // Lazy softmax rescale: O and the row sums are rescaled only when a row maximum grows by more
    // than 2^8 (exact result; bounds P by 2^8). P is fp16 here (11 significant bits), so the
    // rounding of the largest P that made the bf16 kernels rescale at every growth is 8x smaller,
    // below the error of the e4m3 inputs themselves; the threshold stays as measured for this
    // kernel's speed.
    static constexpr float kRescaleThresholdLog2 = 8.0f;

    // e4m3 operands (Q, K, staged V): one byte per element, 128 dims per 128-byte swizzle row.
    static constexpr int32_t kCodeBytes = 1;
    static constexpr int32_t kCodeSlabDims = kSwizzleBytes / kCodeBytes;
    static constexpr int32_t kCodeRowBytes = kHeadDim * kCodeBytes;
    static constexpr int32_t kCodeVecsPerRow = kCodeRowBytes / kVecBytes;
    static constexpr int32_t kCodeVecsPerGroupRow = kCodeVecsPerRow / kWarpGroups;
    static constexpr int32_t kCodeSlabsPerGroup = kHeadDim / kWarpGroups / kCodeSlabDims;
    static constexpr int32_t kScoreK = 32;  // k of wgmma m64n32k32 e4m3
    static constexpr int32_t kQkSteps = kHeadDim / kWarpGroups / kScoreK;

    // Shared memory: Q codes, a ring of K code chunks, staged V codes (cp.async lands here, each
    // thread converts what it loaded), fp16 V chunks (the 16-bit V layout of P V), and the score
    // exchange.
    static constexpr int32_t kQBytes = kRowsPerBlock * kCodeRowBytes;
    static constexpr int32_t kCodeChunkBytes = kTileKeys * kCodeRowBytes;
    static constexpr int32_t kHalfChunkBytes = kTileKeys * kHeadDim * kValueBytes;
    static constexpr int32_t kKeySlots = 2;        // K_j+1, K_j+2 (schedule in mainloop.cuh)
    static constexpr int32_t kStagedSlots = 2;     // V codes of the next two tiles
    static constexpr int32_t kHalfValueSlots = 2;  // fp16 V being read by P V, and the next one
    // Shared memory plan (byte offsets from the dynamic shared memory base rounded up to
    // kSmemAlign, which the allocation leaves room for).
    struct SmemPlan {
        static constexpr int32_t kQ = 0;
        static constexpr int32_t kKeyRing = kQ + kQBytes;
        static constexpr int32_t kStagedRing = kKeyRing + kKeySlots * kCodeChunkBytes;
        static constexpr int32_t kValueRing = kStagedRing + kStagedSlots * kCodeChunkBytes;
        static constexpr int32_t kExchange = kValueRing + kHalfValueSlots * kHalfChunkBytes;
        static constexpr int32_t kEnd = kExchange + kExchangeBytes;
        static constexpr int32_t kBytes = kEnd + kSmemAlign;
    };
    static constexpr int32_t kSmemBytes = SmemPlan::kBytes;

    static constexpr int32_t kMinSm = 90;  // wgmma e4m3 (sm_90a)

    static_assert(kCodeVecsPerGroupRow % kVecsPerSlabRow == 0, "a warpgroup's codes are whole 128-byte slabs");
    static_assert(kWarpGroupThreads % kCodeVecsPerGroupRow == 0, "whole rows per load pass");
    static_assert(kCodeSlabDims % kScoreK == 0, "whole score steps per slab");
    static_assert(kScoreK * kCodeBytes == kScoreStepBytes && kCodeSlabsPerGroup * kStepsPerSlab == kQkSteps,
                  "e4m3 score steps are the bf16 kernel's 32-byte steps");
    static_assert(kSmemBytes <= kSmemLimitSm90, "must fit sm_90 shared memory (227 KB)");

    static constexpr KernelDesc desc = {
        "wgmma_e4m3q_d512", "wideattn_wgmma_e4m3q_d512",
        kE4M3, kE4M3, kBF16,
        kHeadDim, kHeadDim, kHeadDim,
        kGroup, kGroup,
        kTileTokens, kTileKeys, kGroup, kThreads, kSmemBytes, kMinSm,
        "varlen,paged,causal,gqa,lse,fp8_kv,fp8_q,split_kv", kKindPrefill, "wideattn_wgmma_e4m3q_d512_split"};
};

}  // namespace wideattn
