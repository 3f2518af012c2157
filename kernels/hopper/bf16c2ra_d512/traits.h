// traits.h - compile-time constants of the shared-acquire form of the two-CTA Hopper-tier BF16
// prefill kernel (kernel wideattn_wgmma_bf16c2ra_d512, sm_90a only): the traits of
// wgmma_bf16c2_d512 (kernels/hopper/bf16c2_d512/traits.h), whose cluster and block it runs, with
// the wait for the partner's scores made of a relaxed cluster-scope wait and an acquire fence
// restricted to shared memory (kSharedAcquire; bf16c2_d512/exchange.cuh, collect_scores).
#pragma once

#include "kernels/common/kernel_desc.h"
#include "kernels/hopper/bf16c2_d512/traits.h"

namespace wideattn {

struct WgmmaBf16C2raD512Traits : WgmmaBf16C2D512Traits {
    static constexpr bool kSharedAcquire = true;

    static constexpr KernelDesc desc = {
        "wgmma_bf16c2ra_d512", "wideattn_wgmma_bf16c2ra_d512",
        kBF16, kBF16, kBF16,
        kHeadDim, kHeadDim, kHeadDim,
        kGroup, kGroup,
        kClusterTileTokens, kTileKeys, kGroup, kThreads, kSmemBytes, kMinSm,
        "varlen,paged,causal,gqa,lse,tma_kv,cta_pair,many_tokens,split_kv", kKindPrefill, "wideattn_wgmma_bf16c2ra_d512_split"};
};

}  // namespace wideattn
