// traits.h - compile-time constants of the Hopper-tier 8-bit prefill kernel with alternating
// 64-key tiles for bf16 Q over an e4m3 cache whose V pages are transposed (kernel
// wideattn_wgmma_e4m3alt64kv_d512, sm_90a only, candidate): the traits of wgmma_e4m3alt64_d512
// (fp8/hopper_e4m3alt64_d512/traits.h), whose block it runs, plus what the in-kernel quantisation
// of Q needs (BlockQuantizedQTraits, fp8/hopper_e4m3kv_d512/traits.h): Q read as bf16 and
// quantised to e4m3 with one scale per block, the warps' maxima after the shared-memory plan.
#pragma once

#include "fp8/hopper_e4m3alt64_d512/traits.h"
#include "fp8/hopper_e4m3kv_d512/traits.h"
#include "kernels/common/kernel_desc.h"

namespace wideattn {

struct WgmmaE4m3Alt64KvD512Traits : BlockQuantizedQTraits<WgmmaE4m3Alt64D512Traits> {
    static constexpr KernelDesc desc = {
        "wgmma_e4m3alt64kv_d512", "wideattn_wgmma_e4m3alt64kv_d512",
        kBF16, kE4M3, kBF16,
        kHeadDim, kHeadDim, kHeadDim,
        kGroup, kGroup,
        kTileTokens, kTileKeys, kGroup, kThreads, kSmemBytes, kMinSm,
        "varlen,paged,causal,gqa,lse,fp8_kv,tma_kv,v_transposed,split_kv", kKindPrefill,
        "wideattn_wgmma_e4m3alt64kv_d512_split"};
};

}  // namespace wideattn
