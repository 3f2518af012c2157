// traits.h - the compile-time constants of decode_e4m3kfvli_d512 (kernel
// wideattn_decode_e4m3kfvli_d512, sm_90a), a candidate form of decode_e4m3kfv_d512
// (fp8/decode_e4m3kfv_d512/traits.h): decode_e4m3kfvpa_d512's block (the block-table entries a
// step ahead) with the lean V copies (kLeanIssue, fp8/decode_e4m3kfv_d512/block.cuh:
// WarpStream::copy_value_rows_lean and page_of with a page shift, fp8/decode_e4m3_d512/loads.cuh),
// the form of decode_bf16kfvli_d512. The same copies: its output is decode_e4m3kfv_d512's bit for
// bit.
#pragma once

#include "fp8/decode_e4m3kfv_d512/traits.h"
#include "kernels/common/kernel_desc.h"

namespace wideattn {

struct DecodeE4m3KfvLiD512Traits : DecodeE4m3KfvD512Traits {
    static constexpr bool kPagesAhead = true;
    static constexpr bool kLeanIssue = true;

    static constexpr KernelDesc desc = {
        "decode_e4m3kfvli_d512", "wideattn_decode_e4m3kfvli_d512",
        kBF16, kE4M3, kBF16,
        kHeadDim, kHeadDim, kHeadDim,
        kGroup, kGroup,
        kTileTokens, kTileKeys, kGroup, kThreads, kSmemBytes, kMinSm,
        "varlen,paged,causal,gqa,lse,fp8_kv,split_kv,single_token,k_from_v,k_from_v_only", kKindPrefill,
        "wideattn_decode_e4m3kfvli_d512_split"};
};

}  // namespace wideattn
