// traits.h - the compile-time constants of the folded K-from-V decode kernel (kernel
// wideattn_decode_e4m3kfvfold_d512, sm_90a, candidate): decode_e4m3kfv_d512's
// (fp8/decode_e4m3kfv_d512/traits.h) with a second Q tile in shared memory, the folded Q
// (q_d w_d v_scale 2^-shift in f16) that the pair blocks without rotation multiply with the V codes
// as they are (fp8/decode_e4m3kfv_d512/keys.cuh, fold_weights_into_q).
#pragma once

#include <cstdint>

#include "fp8/decode_e4m3kfv_d512/traits.h"
#include "kernels/common/kernel_desc.h"

namespace wideattn {

struct DecodeE4m3KfvFoldD512Traits : DecodeE4m3KfvD512Traits {
    // decode_e4m3kfv_d512's plan, then the folded Q (the layout of kQ).
    struct SmemPlan : DecodeE4m3KfvD512Traits::SmemPlan {
        static constexpr int32_t kQFold = DecodeE4m3KfvD512Traits::SmemPlan::kEnd;
        static constexpr int32_t kEnd = kQFold + kQBytes;
        static constexpr int32_t kBytes = kEnd;
    };
    static constexpr int32_t kSmemBytes = SmemPlan::kBytes;

    static_assert(SmemPlan::kQFold % kVecBytes == 0, "the folded Q is read and written by 16-byte shared accesses");
    static_assert(kSmemBytes <= kSmemLimitSm90, "must fit sm_90 shared memory (227 KB)");

    static constexpr KernelDesc desc = {
        "decode_e4m3kfvfold_d512", "wideattn_decode_e4m3kfvfold_d512",
        kBF16, kE4M3, kBF16,
        kHeadDim, kHeadDim, kHeadDim,
        kGroup, kGroup,
        kTileTokens, kTileKeys, kGroup, kThreads, kSmemBytes, kMinSm,
        "varlen,paged,causal,gqa,lse,fp8_kv,split_kv,single_token,k_from_v,k_from_v_only", kKindPrefill,
        "wideattn_decode_e4m3kfvfold_d512_split"};
};

}  // namespace wideattn
