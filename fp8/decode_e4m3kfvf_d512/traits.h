// traits.h - compile-time constants of the folded-Q form of the single-token decode kernel that
// rebuilds K from an e4m3 V-only cache (kernel wideattn_decode_e4m3kfvf_d512, sm_90a; a
// candidate): decode_e4m3kfvb_d512's traits (fp8/decode_e4m3kfvb_d512/traits.h) with kFoldQ. Where
// a dim does not rotate, K = x = (v v_scale) w and the score's share of it is q . x = (q w v_scale)
// . v: the block folds k_norm's weight and v_scale into Q once (Q' = f16(q w v_scale), a second Q
// tile), and the unrotated pair blocks' scores take the V codes as they are (e4m3 -> f16, exact)
// against Q' in an f16 mma; no K is built for them. The rotated blocks are decode_e4m3kfvb_d512's.
// Other roundings than the mode's (Q' rounded to f16 instead of x to bf16), so other output bits:
// accuracy decides, not a bit comparison (fp8/decode_e4m3kfvf_d512/NOTES.md).
#pragma once

#include "fp8/decode_e4m3kfvb_d512/traits.h"
#include "kernels/common/folded_q_traits.h"
#include "kernels/common/kernel_desc.h"

namespace wideattn {

struct DecodeE4m3KfvFD512Traits : FoldedQTraits<DecodeE4m3KfvBD512Traits> {
    static constexpr KernelDesc desc = {
        "decode_e4m3kfvf_d512", "wideattn_decode_e4m3kfvf_d512",
        kBF16, kE4M3, kBF16,
        kHeadDim, kHeadDim, kHeadDim,
        kGroup, kGroup,
        kTileTokens, kTileKeys, kGroup, kThreads, kSmemBytes, kMinSm,
        "varlen,paged,causal,gqa,lse,fp8_kv,split_kv,single_token,k_from_v,k_from_v_only", kKindPrefill,
        "wideattn_decode_e4m3kfvf_d512_split"};
};

}  // namespace wideattn
