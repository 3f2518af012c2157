// traits.h - compile-time constants of the folded-Q form of the single-token decode kernel that
// rebuilds K from a BF16 V-only cache (kernel wideattn_decode_bf16kfvf_d512, sm_90a; a candidate):
// decode_bf16kfv_d512's traits (kernels/decode_bf16kfv_d512/traits.h) with kFoldQ. Where a dim does
// not rotate, K = x = bf16(v w) and the score's share of it is q . x = (q w) . v: the block folds
// k_norm's weight into Q once (Q' = bf16(q w), a second Q tile), and the unrotated Q loads' scores
// take the V words as they are against Q'; no K is built for them. The rotated ones are
// decode_bf16kfv_d512's. Q' is rounded where the mode rounds x, so other output bits: accuracy
// decides, not a bit comparison (kernels/decode_bf16kfvf_d512/NOTES.md).
#pragma once

#include "kernels/common/folded_q_traits.h"
#include "kernels/common/kernel_desc.h"
#include "kernels/decode_bf16kfv_d512/traits.h"

namespace wideattn {

struct DecodeBf16KfvFD512Traits : FoldedQTraits<DecodeBf16KfvD512Traits> {
    static constexpr KernelDesc desc = {
        "decode_bf16kfvf_d512", "wideattn_decode_bf16kfvf_d512",
        kBF16, kBF16, kBF16,
        kHeadDim, kHeadDim, kHeadDim,
        kGroup, kGroup,
        kTileTokens, kTileKeys, kGroup, kThreads, kSmemBytes, kMinSm,
        "varlen,paged,causal,gqa,lse,split_kv,single_token,k_from_v,k_from_v_only", kKindPrefill,
        "wideattn_decode_bf16kfvf_d512_split"};
};

}  // namespace wideattn
