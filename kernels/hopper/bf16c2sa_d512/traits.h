// traits.h - compile-time constants of the scores-ahead form of the two-CTA Hopper-tier BF16
// prefill kernel (kernel wideattn_wgmma_bf16c2sa_d512, sm_90a only): the traits of wgmma_bf16c2_d512
// (kernels/hopper/bf16c2_d512/traits.h), whose cluster, block and free-running steps it runs, with
// each step's next score product Q K_j+2^T issued right after S_j+1 is posted to the partner CTA,
// before the partner's part is collected (kScoresAhead; bf16c2_d512/mainloop.cuh, pipelined_step).
#pragma once

#include "kernels/common/kernel_desc.h"
#include "kernels/hopper/bf16c2_d512/traits.h"

namespace wideattn {

struct WgmmaBf16C2saD512Traits : WgmmaBf16C2D512Traits {
    static constexpr bool kScoresAhead = true;

    static constexpr KernelDesc desc = {
        "wgmma_bf16c2sa_d512", "wideattn_wgmma_bf16c2sa_d512",
        kBF16, kBF16, kBF16,
        kHeadDim, kHeadDim, kHeadDim,
        kGroup, kGroup,
        kClusterTileTokens, kTileKeys, kGroup, kThreads, kSmemBytes, kMinSm,
        "varlen,paged,causal,gqa,lse,tma_kv,cta_pair,many_tokens,split_kv", kKindPrefill, "wideattn_wgmma_bf16c2sa_d512_split"};
};

}  // namespace wideattn
