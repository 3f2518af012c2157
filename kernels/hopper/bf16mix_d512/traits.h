// traits.h - the constants of wgmma_bf16mix_d512 (kernel.cu, sm_90a, a candidate): the grid,
// block, shared memory and features of wgmma_bf16_d512 (kernels/hopper/bf16_d512/traits.h), whose
// blocks of more than one token it runs unchanged; a block whose token tile holds one token runs
// decode_bf16_d512's block (kernels/decode_bf16_d512/) in the same shared memory and threads.
// Read by the kernel source and by the manifest generator.
#pragma once

#include "kernels/common/kernel_desc.h"
#include "kernels/decode_bf16_d512/traits.h"
#include "kernels/hopper/bf16_d512/traits.h"

namespace wideattn {

struct WgmmaBf16MixD512Traits : WgmmaBf16D512Traits {
    using DecodeTraits = DecodeBf16D512Traits;

    static_assert(DecodeTraits::kThreads == kThreads, "both blocks run on the same threads");
    static_assert(DecodeTraits::kSmemBytes + DecodeTraits::kSmemAlign <= kSmemBytes,
                  "the decode block's shared memory fits the launch's");
    static_assert(DecodeTraits::kHeadDim == kHeadDim && DecodeTraits::kGroup == kGroup,
                  "both blocks serve the same heads");
    static_assert(DecodeTraits::kMinSm <= kMinSm, "the decode block runs wherever this kernel does");

    static constexpr KernelDesc desc = {
        "wgmma_bf16mix_d512", "wideattn_wgmma_bf16mix_d512",
        kBF16, kBF16, kBF16,
        kHeadDim, kHeadDim, kHeadDim,
        kGroup, kGroup,
        kTileTokens, kTileKeys, kGroup, kThreads, kSmemBytes, kMinSm,
        "varlen,paged,causal,gqa,lse,tma_kv,split_kv", kKindPrefill, "wideattn_wgmma_bf16mix_d512_split"};
};

}  // namespace wideattn
