// traits.h - the compile-time constants of decode_bf16kfvpa_d512 (kernel
// wideattn_decode_bf16kfvpa_d512, sm_90a), a candidate form of decode_bf16kfv_d512
// (kernels/decode_bf16kfv_d512/traits.h): the same block, each warp reading the block-table entry of
// a sub-tile one step before the V copies that need it (kPagesAhead, kernels/decode_bf16kfv_d512/
// block.cuh), so the copies issued after a step's P V do not wait for a table load. The same
// values in the same order: its output is decode_bf16kfv_d512's bit for bit.
#pragma once

#include "kernels/common/kernel_desc.h"
#include "kernels/decode_bf16kfv_d512/traits.h"

namespace wideattn {

struct DecodeBf16KfvPaD512Traits : DecodeBf16KfvD512Traits {
    static constexpr bool kPagesAhead = true;

    static constexpr KernelDesc desc = {
        "decode_bf16kfvpa_d512", "wideattn_decode_bf16kfvpa_d512",
        kBF16, kBF16, kBF16,
        kHeadDim, kHeadDim, kHeadDim,
        kGroup, kGroup,
        kTileTokens, kTileKeys, kGroup, kThreads, kSmemBytes, kMinSm,
        "varlen,paged,causal,gqa,lse,split_kv,single_token,k_from_v,k_from_v_only", kKindPrefill,
        "wideattn_decode_bf16kfvpa_d512_split"};
};

}  // namespace wideattn
