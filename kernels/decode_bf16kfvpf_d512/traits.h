// traits.h - compile-time constants of decode_bf16kfv_d512 with the L2 prefetch of the V rows
// ahead of their copies (kernel wideattn_decode_bf16kfvpf_d512, sm_90a; a candidate):
// decode_bf16kfv_d512's traits, block and arithmetic (kernels/decode_bf16kfv_d512/), with
// kL2PrefetchSubTilesAhead = 2: at the end of step i each lane asks the L2 for a piece of the
// second half of sub-tile i + 2's V rows (cp.async.bulk.prefetch.L2), a step before their copy,
// which is issued just before the wait for it. Nothing computed changes: the same bits.
#pragma once

#include <cstdint>

#include "kernels/common/kernel_desc.h"
#include "kernels/decode_bf16kfv_d512/traits.h"

namespace wideattn {

struct DecodeBf16KfvPfD512Traits : DecodeBf16KfvD512Traits {
    static constexpr int32_t kL2PrefetchSubTilesAhead = 2;

    static constexpr KernelDesc desc = {
        "decode_bf16kfvpf_d512", "wideattn_decode_bf16kfvpf_d512",
        kBF16, kBF16, kBF16,
        kHeadDim, kHeadDim, kHeadDim,
        kGroup, kGroup,
        kTileTokens, kTileKeys, kGroup, kThreads, kSmemBytes, kMinSm,
        "varlen,paged,causal,gqa,lse,split_kv,single_token,k_from_v,k_from_v_only", kKindPrefill,
        "wideattn_decode_bf16kfvpf_d512_split"};
};

}  // namespace wideattn
