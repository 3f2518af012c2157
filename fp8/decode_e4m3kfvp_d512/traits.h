// traits.h - compile-time constants of the warp-pair form of the bf16-key single-token decode
// kernel that rebuilds K from an e4m3 V-only cache (kernel wideattn_decode_e4m3kfvp_d512, sm_90a):
// decode_e4m3kfvb_d512's arithmetic (fp8/decode_e4m3kfvb_d512/traits.h) with 12 warps a block in
// 6 pairs. A pair streams every 6th sub-tile, as one warp of decode_e4m3kfvb_d512 every 8th; warp h of the
// pair copies and reads only the dim blocks c with c % 2 == h (pair blocks h, h + 2, h + 4, h + 6
// and their RoPE partners 256 on: 256 dims), builds their K, adds its partial scores to its
// partner's through shared memory (both then hold the same sums) and keeps O^T of its dims (64
// registers instead of 128), so that 3 warps a scheduler fit instead of 2.
#pragma once

#include "fp8/decode_e4m3kfvb_d512/traits.h"
#include "kernels/common/kernel_desc.h"

namespace wideattn {

struct DecodeE4m3KfvPD512Traits : DecodeE4m3KfvBD512Traits {
    using KfvbTraits = DecodeE4m3KfvBD512Traits;

    // kWarps is the number of key streams (the sub-tile order, the merge's parts, the
    // statistics); each is run by kDimSplit warps. Six streams, 12 warps: 168 registers a thread
    // (16 warps allow 128, where this block spilled 320 bytes; 14, 128 too, nvcc 13.0).
    static constexpr int32_t kWarps = 6;
    static constexpr int32_t kDimSplit = 2;
    static constexpr int32_t kBlockWarps = kWarps * kDimSplit;  // 12
    static constexpr int32_t kThreads = kBlockWarps * kWarpSize;
    static constexpr int32_t kMergeBytes = kWarps * kRows * kMergeRowBytes;
    static constexpr int32_t kStatsBytes = kWarps * kRows * 2 * 4;

    // A warp's chunk: the 16 keys' codes of its 8 dim blocks, rows of 256 bytes (the row that
    // swizzled() and block_row_address() see), its blocks in order (chunk_block).
    static constexpr int32_t kRowBytes = KfvbTraits::kRowBytes / kDimSplit;
    static constexpr int32_t kDimBlocks = KfvbTraits::kDimBlocks / kDimSplit;
    static constexpr int32_t kONTiles = 2 * kDimBlocks;
    static constexpr int32_t kChunkVecsPerRow = kRowBytes / kVecBytes;            // 16
    static constexpr int32_t kRowsPerCopy = kWarpSize / kChunkVecsPerRow;         // 2 keys a copy step
    static constexpr int32_t kChunkBytes = kSubTileKeys * kRowBytes;
    // The ring: kRingChunks chunks, kChunksInFlight of them in flight while one is read; the plan
    // reserves kRingSlots (a variant with the deeper ring runs under the same manifest).
    static constexpr int32_t kRingChunks = 3;
    static constexpr int32_t kChunksInFlight = kRingChunks - 1;
    static constexpr int32_t kRingSlots = 4;
    static constexpr int32_t kWarpRingBytes = kRingSlots * kChunkBytes;
    WIDEATTN_HOST_DEVICE static constexpr int32_t chunk_block(int32_t c) { return c / kDimSplit; }
    // The global dim of O^T tile n (e0, e1; e2, e3 kOHalfDims further) at lane group g in warp
    // `half` of a pair: decode_e4m3_d512's o_dim of the dim block the tile's chunk block holds.
    WIDEATTN_HOST_DEVICE static constexpr int32_t o_dim_of_half(int32_t n, int32_t g, int32_t half) {
        return KfvbTraits::o_dim(n, g) + kDimBlock * (n / 2 + half);
    }

    // The partial scores a warp gives its partner: 4 fp32 a lane, two parities (a warp writes a
    // parity's slot again two steps later, after its partner read it: the barrier of the step
    // between orders the two).
    static constexpr int32_t kScoreSlotBytes = kWarpSize * 4 * 4;
    static constexpr int32_t kScoreParities = 2;
    static constexpr int32_t kScoreParityBytes = kBlockWarps * kScoreSlotBytes;

    struct SmemPlan {
        static constexpr int32_t kQ = 0;
        static constexpr int32_t kRings = kQ + kQBytes;
        static constexpr int32_t kMerge = kRings;  // reused after the key loop
        static constexpr int32_t kStats = kRings + kBlockWarps * kWarpRingBytes;
        static constexpr int32_t kWeight = kStats + kStatsBytes;
        static constexpr int32_t kFreq = kWeight + kWeightBytes;
        static constexpr int32_t kWeightProducts = kFreq + kFreqBytes;
        static constexpr int32_t kScores = kWeightProducts + kWeightProductBytes;
        static constexpr int32_t kEnd = kScores + kScoreParities * kScoreParityBytes;
        static constexpr int32_t kBytes = kEnd;
    };
    static constexpr int32_t kSmemBytes = SmemPlan::kBytes;

    static_assert(kHalfDim / kDimBlock % kDimSplit == 0 && kPairBlockOffset % kDimSplit == 0,
                  "a warp's pair blocks and their partners have its parity");
    static_assert(kChunkVecsPerRow * kRowsPerCopy == kWarpSize && kSubTileKeys % kRowsPerCopy == 0,
                  "a copy step of the warp covers whole chunk rows");
    static_assert(SmemPlan::kWeight % kVecBytes == 0 && SmemPlan::kFreq % kVecBytes == 0 &&
                      SmemPlan::kWeightProducts % 8 == 0 && SmemPlan::kScores % kVecBytes == 0,
                  "the tables and slots are read by vector shared loads");
    static_assert(kRingChunks <= kRingSlots, "the ring fits its slots");
    static_assert(kMergeBytes <= kBlockWarps * kWarpRingBytes, "the merge area fits in the rings");
    static_assert(kSmemBytes <= kSmemLimitSm90, "must fit sm_90 shared memory (227 KB)");

    static constexpr KernelDesc desc = {
        "decode_e4m3kfvp_d512", "wideattn_decode_e4m3kfvp_d512",
        kBF16, kE4M3, kBF16,
        kHeadDim, kHeadDim, kHeadDim,
        kGroup, kGroup,
        kTileTokens, kTileKeys, kGroup, kThreads, kSmemBytes, kMinSm,
        "varlen,paged,causal,gqa,lse,fp8_kv,split_kv,single_token,k_from_v,k_from_v_only", kKindPrefill,
        "wideattn_decode_e4m3kfvp_d512_split"};
};

}  // namespace wideattn
