// traits.h - compile-time constants of the split-producer form of the two-CTA Hopper-tier BF16
// prefill kernel (kernel wideattn_wgmma_bf16c2sp_d512, sm_90a only): wgmma_bf16c2_d512
// (kernels/hopper/bf16c2_d512/traits.h) with the producer warpgroup's K and V copies issued by
// two threads, one a ring (kSplitProducer; bf16c2_d512/loads.cuh, produce_ring, and schedule.h,
// for_each_ring_load).
#pragma once

#include "kernels/common/kernel_desc.h"
#include "kernels/hopper/bf16c2_d512/traits.h"

namespace wideattn {

struct WgmmaBf16C2spD512Traits : WgmmaBf16C2D512Traits {
    static constexpr bool kSplitProducer = true;

    static constexpr KernelDesc desc = {
        "wgmma_bf16c2sp_d512", "wideattn_wgmma_bf16c2sp_d512",
        kBF16, kBF16, kBF16,
        kHeadDim, kHeadDim, kHeadDim,
        kGroup, kGroup,
        kClusterTileTokens, kTileKeys, kGroup, kThreads, kSmemBytes, kMinSm,
        "varlen,paged,causal,gqa,lse,tma_kv,cta_pair,many_tokens,split_kv", kKindPrefill, "wideattn_wgmma_bf16c2sp_d512_split"};
};

}  // namespace wideattn
