// traits.h - compile-time constants of the lean-table form of the single-token decode kernel that
// rebuilds K from a BF16 V-only cache (kernel wideattn_decode_bf16kfv2_d512, sm_90a): the traits of
// decode_bf16kfv_d512 (kernels/decode_bf16kfv_d512/traits.h), whose block it runs, with
// kLeanTables: a k-step's bf16 k_norm weights by one 16-byte shared load from a packed table, the
// caller's cos / sin words through a lane's two row addresses of a sub-tile, the unrotated Q loads
// unrolled for Gemma 4's description. The same values in the same order as decode_bf16kfv_d512,
// so the same bits.
#pragma once

#include "kernels/common/kernel_desc.h"
#include "kernels/decode_bf16kfv_d512/traits.h"

namespace wideattn {

struct DecodeBf16Kfv2D512Traits : DecodeBf16KfvD512Traits {
    static constexpr bool kLeanTables = true;

    static constexpr KernelDesc desc = {
        "decode_bf16kfv2_d512", "wideattn_decode_bf16kfv2_d512",
        kBF16, kBF16, kBF16,
        kHeadDim, kHeadDim, kHeadDim,
        kGroup, kGroup,
        kTileTokens, kTileKeys, kGroup, kThreads, kSmemBytes, kMinSm,
        "varlen,paged,causal,gqa,lse,split_kv,single_token,k_from_v,k_from_v_only", kKindPrefill,
        "wideattn_decode_bf16kfv2_d512_split"};
};

}  // namespace wideattn
