// traits.h - the compile-time constants of decode_bf16kfvli_d512 (kernel
// wideattn_decode_bf16kfvli_d512, sm_90a), a candidate form of decode_bf16kfv_d512: the block of
// decode_bf16kfvpa_d512 (block-table entries read a step ahead) whose V copies and table loads
// take WarpStream's lean forms (kLeanIssue: the slot by a mask where a page holds a power of two
// of keys, a full in-cache sub-tile copied without the per-key zero-fill selects;
// kernels/decode_bf16_d512/loads.cuh, issue_value_lean). The same copies, so the same bits as
// decode_bf16kfv_d512.
#pragma once

#include "kernels/common/kernel_desc.h"
#include "kernels/decode_bf16kfv_d512/traits.h"

namespace wideattn {

struct DecodeBf16KfvLiD512Traits : DecodeBf16KfvD512Traits {
    static constexpr bool kPagesAhead = true;
    static constexpr bool kLeanIssue = true;

    static constexpr KernelDesc desc = {
        "decode_bf16kfvli_d512", "wideattn_decode_bf16kfvli_d512",
        kBF16, kBF16, kBF16,
        kHeadDim, kHeadDim, kHeadDim,
        kGroup, kGroup,
        kTileTokens, kTileKeys, kGroup, kThreads, kSmemBytes, kMinSm,
        "varlen,paged,causal,gqa,lse,split_kv,single_token,k_from_v,k_from_v_only", kKindPrefill,
        "wideattn_decode_bf16kfvli_d512_split"};
};

}  // namespace wideattn
