// traits.h - decode_bf16kfvbulk_d512 (sm_90a, a candidate): decode_bf16kfv_d512 whose V chunks
// reach shared memory by the bulk-copy engine instead of cp.async. Each chunk row (one key's
// 512 bytes of V over half the dims) is one cp.async.bulk issued by one lane and completing on the
// slot's mbarrier, so a 16-key chunk costs a warp 16 lanes' single instructions instead of 16
// cp.async a lane; the rows land whole, kChunkRowPitch (528) bytes apart, the 16 extra bytes
// putting the 8 rows an ldmatrix matrix reads in distinct banks. Everything else, and so every
// output bit, is decode_bf16kfv_d512's (kernels/decode_bf16kfv_d512/NOTES.md).
#pragma once

#include <cstdint>

#include "kernels/common/kernel_desc.h"
#include "kernels/decode_bf16kfv_d512/traits.h"

namespace wideattn {

struct DecodeBf16KfvBulkD512Traits : DecodeBf16KfvD512Traits {
    static constexpr bool kBulkCopies = true;
    // A row's 512 bytes and 16 of padding: 33 vectors, so row r's vector v sits in bank group
    // (r + v) % 8.
    static constexpr int32_t kChunkRowPitch = kChunkRowBytes + kVecBytes;
    static constexpr int32_t kChunkBytes = kSubTileKeys * kChunkRowPitch;  // 8,448
    static constexpr int32_t kWarpRingBytes = kRingChunks * kChunkBytes;
    static constexpr int32_t kWarpBarrierBytes = kRingChunks * kBarrierBytes;

    struct SmemPlan {
        static constexpr int32_t kQ = 0;
        static constexpr int32_t kRings = kQ + kQBytes;
        static constexpr int32_t kMerge = kRings;  // reused after the key loop
        static constexpr int32_t kStats = kRings + kWarps * kWarpRingBytes;
        static constexpr int32_t kWeight = kStats + kStatsBytes;
        static constexpr int32_t kFreq = kWeight + kWeightBytes;
        static constexpr int32_t kWeightBf16 = kFreq + kFreqBytes;
        static constexpr int32_t kBarriers = kWeightBf16 + kWeightBf16Bytes;
        static constexpr int32_t kEnd = kBarriers + kWarps * kWarpBarrierBytes;
        static constexpr int32_t kBytes = kEnd;
    };
    static constexpr int32_t kSmemBytes = SmemPlan::kBytes;

    static_assert(kChunkRowPitch % kVecBytes == 0 && (kChunkRowPitch / kVecBytes) % kSwizzleRows == 1,
                  "consecutive rows one bank group apart: an ldmatrix matrix's 8 rows conflict-free");
    static_assert(kChunkBytes % kSmemAlign == 0 && SmemPlan::kRings % kSmemAlign == 0,
                  "bulk copies need 16-byte aligned rows; the slots stay 128-byte aligned");
    static_assert(SmemPlan::kBarriers % kBarrierBytes == 0, "mbarriers are 8-byte aligned");
    static_assert(SmemPlan::kWeight % kVecBytes == 0 && SmemPlan::kFreq % kVecBytes == 0 &&
                      SmemPlan::kWeightBf16 % kVecBytes == 0,
                  "the tables are read by 4-, 8- and 16-byte shared loads");
    static_assert(kMergeBytes <= kWarps * kWarpRingBytes, "the merge area fits in the rings");
    static_assert(kSmemBytes <= kSmemLimitSm90, "must fit sm_90 shared memory (227 KB)");

    static constexpr KernelDesc desc = {
        "decode_bf16kfvbulk_d512", "wideattn_decode_bf16kfvbulk_d512",
        kBF16, kBF16, kBF16,
        kHeadDim, kHeadDim, kHeadDim,
        kGroup, kGroup,
        kTileTokens, kTileKeys, kGroup, kThreads, kSmemBytes, kMinSm,
        "varlen,paged,causal,gqa,lse,split_kv,single_token,k_from_v,k_from_v_only", kKindPrefill,
        "wideattn_decode_bf16kfvbulk_d512_split"};
};

}  // namespace wideattn
