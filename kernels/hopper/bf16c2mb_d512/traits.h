// traits.h - compile-time constants of the bounded form of the two-CTA Hopper-tier BF16 prefill
// kernel (kernel wideattn_wgmma_bf16c2mb_d512, sm_90a only): the traits of wgmma_bf16c2_d512
// (kernels/hopper/bf16c2_d512/traits.h), whose cluster and block it runs, with each CTA sending
// its partial row maxima beside its partial scores and the softmax skipping the exact row maxima
// where their bound shows that no row maximum grows (kMaxBound; bf16c2_d512/exchange.cuh,
// mainloop.cuh). The receive slots grow by the maxima, so the shared-memory plan is its own
// instance of the free form's SmemPlanFor.
#pragma once

#include "kernels/common/kernel_desc.h"
#include "kernels/hopper/bf16c2_d512/traits.h"

namespace wideattn {

struct WgmmaBf16C2mbD512Traits : WgmmaBf16C2D512Traits {
    static constexpr bool kMaxBound = true;

    static constexpr int32_t kExchangeBytes = kScoreTileBytes + kScoreMaxBytes;
    static constexpr int32_t kReceiveSlotBytes = kExchangeBytes;
    static constexpr int32_t kReceiveBytes = kRowGroups * kExchangeParities * kReceiveSlotBytes;
    using SmemPlan = SmemPlanFor<kReceiveBytes>;
    static constexpr int32_t kSmemBytes = SmemPlan::kBytes;
    static_assert(kReceiveSlotBytes % kVecBytes == 0 && SmemPlan::kBarriers % kBarrierBytes == 0,
                  "16-byte score stores, 8-byte barriers");
    static_assert(kSmemBytes <= kSmemLimitSm90, "must fit sm_90 shared memory (227 KB)");
    // What the barrier of a phase counts: each of a row group's warps posts its part of the tile
    // (st.async, 16 bytes a thread and 8-column quad) and, from each quad's first lane, the quad's
    // two row maxima (8 bytes).
    static_assert(kExchangeBytes == kRowTilesPerGroup * (kScoreTileBytes / kRowTilesPerGroup +
                                                         kWarpSize / 4 * 2 * static_cast<int32_t>(sizeof(float))),
                  "the exchange's bytes are the warps' posts");

    static constexpr KernelDesc desc = {
        "wgmma_bf16c2mb_d512", "wideattn_wgmma_bf16c2mb_d512",
        kBF16, kBF16, kBF16,
        kHeadDim, kHeadDim, kHeadDim,
        kGroup, kGroup,
        kClusterTileTokens, kTileKeys, kGroup, kThreads, kSmemBytes, kMinSm,
        "varlen,paged,causal,gqa,lse,tma_kv,cta_pair,many_tokens,split_kv", kKindPrefill, "wideattn_wgmma_bf16c2mb_d512_split"};
};

}  // namespace wideattn
