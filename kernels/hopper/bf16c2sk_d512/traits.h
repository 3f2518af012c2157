// traits.h - compile-time constants of the form of the two-CTA Hopper-tier BF16 prefill kernel that
// skips an empty row group (kernel wideattn_wgmma_bf16c2sk_d512, sm_90a only): the traits of
// wgmma_bf16c2_d512 (kernels/hopper/bf16c2_d512/traits.h) with kSkipEmptyGroups: a cluster tile of
// 8 tokens or fewer runs its first row group only (bf16c2_d512/block.cuh), so the kernel may serve
// calls of short sequences (verification steps, mixed batches) and has no many_tokens rule.
#pragma once

#include "kernels/common/kernel_desc.h"
#include "kernels/hopper/bf16c2_d512/traits.h"

namespace wideattn {

struct WgmmaBf16C2skD512Traits : WgmmaBf16C2D512Traits {
    static constexpr bool kSkipEmptyGroups = true;

    static constexpr KernelDesc desc = {
        "wgmma_bf16c2sk_d512", "wideattn_wgmma_bf16c2sk_d512",
        kBF16, kBF16, kBF16,
        kHeadDim, kHeadDim, kHeadDim,
        kGroup, kGroup,
        kClusterTileTokens, kTileKeys, kGroup, kThreads, kSmemBytes, kMinSm,
        "varlen,paged,causal,gqa,lse,tma_kv,cta_pair,split_kv", kKindPrefill, "wideattn_wgmma_bf16c2sk_d512_split"};
};

}  // namespace wideattn
