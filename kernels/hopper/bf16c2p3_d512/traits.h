// traits.h - wgmma_bf16c2p3_d512, a measured form of wgmma_bf16c2p_d512 (kernels/hopper/bf16c2p_d512/,
// whose sources it runs): 3 P message buffers, the fed warpgroup's wait acquiring at cluster scope.
#pragma once

#include "kernels/common/kernel_desc.h"
#include "kernels/hopper/bf16c2p_d512/traits.h"

namespace wideattn {

struct WgmmaBf16C2p3D512Traits : WgmmaBf16C2pFormTraits<3, false> {
    static constexpr KernelDesc desc = {
        "wgmma_bf16c2p3_d512", "wideattn_wgmma_bf16c2p3_d512",
        kBF16, kBF16, kBF16,
        kHeadDim, kHeadDim, kHeadDim,
        kGroup, kGroup,
        kClusterTileTokens, kTileKeys, kGroup, kThreads, kSmemBytes, kMinSm,
        "varlen,paged,causal,gqa,lse,tma_kv,cta_pair,many_tokens,split_kv", kKindPrefill, "wideattn_wgmma_bf16c2p3_d512_split"};
};

}  // namespace wideattn
