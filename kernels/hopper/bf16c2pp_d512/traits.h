// traits.h - compile-time constants of the ordered form of the two-CTA Hopper-tier BF16 prefill
// kernel (kernel wideattn_wgmma_bf16c2pp_d512, sm_90a only): the traits of wgmma_bf16c2_d512
// (kernels/hopper/bf16c2_d512/traits.h), whose cluster and block it runs, with the two row groups
// of a CTA issuing their products in turns (the published ping-pong; bf16c2_d512/mainloop.cuh,
// consumer_mainloop_ordered, and bf16c2_d512/schedule.h).
#pragma once

#include "kernels/common/kernel_desc.h"
#include "kernels/hopper/bf16c2_d512/traits.h"

namespace wideattn {

struct WgmmaBf16C2ppD512Traits : WgmmaBf16C2D512Traits {
    static constexpr bool kOrderedTurns = true;

    static constexpr KernelDesc desc = {
        "wgmma_bf16c2pp_d512", "wideattn_wgmma_bf16c2pp_d512",
        kBF16, kBF16, kBF16,
        kHeadDim, kHeadDim, kHeadDim,
        kGroup, kGroup,
        kClusterTileTokens, kTileKeys, kGroup, kThreads, kSmemBytes, kMinSm,
        "varlen,paged,causal,gqa,lse,tma_kv,cta_pair,many_tokens,split_kv", kKindPrefill, "wideattn_wgmma_bf16c2pp_d512_split"};
};

}  // namespace wideattn
