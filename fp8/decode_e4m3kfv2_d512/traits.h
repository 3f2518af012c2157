// traits.h - compile-time constants of the lean-table form of the single-token decode kernel that
// rebuilds K from an e4m3 V-only cache (kernel wideattn_decode_e4m3kfv2_d512, sm_90a): the traits of
// decode_e4m3kfv_d512 (fp8/decode_e4m3kfv_d512/traits.h), whose block it runs, with kLeanTables: the
// caller's cos / sin words through a lane's two row addresses of a sub-tile, the unrotated pair
// blocks unrolled for Gemma 4's description. The same values in the same order as
// decode_e4m3kfv_d512, so the same bits.
#pragma once

#include "fp8/decode_e4m3kfv_d512/traits.h"
#include "kernels/common/kernel_desc.h"

namespace wideattn {

struct DecodeE4m3Kfv2D512Traits : DecodeE4m3KfvD512Traits {
    static constexpr bool kLeanTables = true;

    static constexpr KernelDesc desc = {
        "decode_e4m3kfv2_d512", "wideattn_decode_e4m3kfv2_d512",
        kBF16, kE4M3, kBF16,
        kHeadDim, kHeadDim, kHeadDim,
        kGroup, kGroup,
        kTileTokens, kTileKeys, kGroup, kThreads, kSmemBytes, kMinSm,
        "varlen,paged,causal,gqa,lse,fp8_kv,split_kv,single_token,k_from_v,k_from_v_only", kKindPrefill,
        "wideattn_decode_e4m3kfv2_d512_split"};
};

}  // namespace wideattn
