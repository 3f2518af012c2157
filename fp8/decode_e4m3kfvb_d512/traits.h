// traits.h - compile-time constants of the bf16-key form of the single-token decode kernel that
// rebuilds K from an e4m3 V-only cache (kernel wideattn_decode_e4m3kfvb_d512, sm_90a):
// the traits of decode_e4m3kfv_d512 (fp8/decode_e4m3kfv_d512/traits.h), whose block it runs, with
// kBf16Keys: K enters a bf16 mma as the reference's bf16 values against bf16 Q as the call gives
// it (no power of two on either, no f16 conversion of K) in every block, and x = bf16((v v_scale)
// w) by one mul.rn.bf16x2 a pair where the block's v_scale is a power of two and every w v_scale
// a bf16 value (keys.cuh, stage_weight_products), else by the mode's fp32 steps. The same K values;
// the shared memory adds the table of those products.
#pragma once

#include "fp8/decode_e4m3kfv_d512/traits.h"
#include "kernels/common/kernel_desc.h"

namespace wideattn {

struct DecodeE4m3KfvBD512Traits : DecodeE4m3KfvD512Traits {
    using KfvTraits = DecodeE4m3KfvD512Traits;
    static constexpr bool kBf16Keys = true;

    // One rotated pair block's cos / sin words loaded ahead of the unrotated ones, not two: 16
    // registers fewer for the bf16 path's split entry, which spilled at the cap with two.
    static constexpr int32_t kCosSinBlocksAhead = 1;
    // The cos / sin table rows of the warp's sub-tile i + 1 asked of the L2 at the top of step i
    // (block.cuh): 8-10% faster at 1 x 128k, 8 x 32k and 64 x 8k than without (H100, 2026-12-07,
    // NOTES.md); two sub-tiles ahead gained less.
    static constexpr int32_t kCosSinRowsAhead = 1;

    // bf16(w v_scale) of the 512 dims, read 8 bytes (4 dims) at a time.
    static constexpr int32_t kWeightProductBytes = kHeadDim * 2;

    struct SmemPlan : KfvTraits::SmemPlan {
        static constexpr int32_t kWeightProducts = KfvTraits::SmemPlan::kEnd;
        static constexpr int32_t kEnd = kWeightProducts + kWeightProductBytes;
        static constexpr int32_t kBytes = kEnd;
    };
    static constexpr int32_t kSmemBytes = SmemPlan::kBytes;

    static_assert(SmemPlan::kWeightProducts % 8 == 0, "the products are read by 8-byte shared loads");
    static_assert(kQRowBytes == kHeadDim * 2, "bf16 Q fills the f16 Q tile's rows");
    static_assert(kSmemBytes <= kSmemLimitSm90, "must fit sm_90 shared memory (227 KB)");

    static constexpr KernelDesc desc = {
        "decode_e4m3kfvb_d512", "wideattn_decode_e4m3kfvb_d512",
        kBF16, kE4M3, kBF16,
        kHeadDim, kHeadDim, kHeadDim,
        kGroup, kGroup,
        kTileTokens, kTileKeys, kGroup, kThreads, kSmemBytes, kMinSm,
        "varlen,paged,causal,gqa,lse,fp8_kv,split_kv,single_token,k_from_v,k_from_v_only", kKindPrefill,
        "wideattn_decode_e4m3kfvb_d512_split"};
};

}  // namespace wideattn
