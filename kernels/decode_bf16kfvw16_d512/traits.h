// traits.h - the compile-time constants of decode_bf16kfvw16_d512 (kernel
// wideattn_decode_bf16kfvw16_d512, sm_90a), a candidate form of the BF16 K-from-V decode kernel:
// decode_bf16kfvw12_d512's block (kernels/decode_bf16kfvw12_d512/) with four warps sharing each
// 16-key sub-tile, each a quarter of the dims (every fourth 16-dim k-step of both halves: with
// Gemma 4's description one rotated k-step a warp), 32 registers of O; four sets of four warps,
// 16 warps a block (4 a scheduler), at most 128 registers a thread, three 4 KB slots a warp.
#pragma once

#include "kernels/common/kernel_desc.h"
#include "kernels/decode_bf16kfvw12_d512/traits.h"

namespace wideattn {

struct DecodeBf16KfvW16D512Traits : DecodeBf16KfvSplitBlock<4, 4, 3> {
    static constexpr KernelDesc desc = {
        "decode_bf16kfvw16_d512", "wideattn_decode_bf16kfvw16_d512",
        kBF16, kBF16, kBF16,
        kHeadDim, kHeadDim, kHeadDim,
        kGroup, kGroup,
        kTileTokens, kTileKeys, kGroup, kThreads, kSmemBytes, kMinSm,
        "varlen,paged,causal,gqa,lse,split_kv,single_token,k_from_v,k_from_v_only", kKindPrefill,
        "wideattn_decode_bf16kfvw16_d512_split"};
};

}  // namespace wideattn
