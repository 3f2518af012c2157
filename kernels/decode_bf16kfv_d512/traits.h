// traits.h - the compile-time constants of the single-token decode kernel that rebuilds K from V
// (WIDEATTN_FLAG_K_FROM_V) over a BF16 V-only cache, bf16 Q and O, head dim 512, GQA group 8
// (kernel wideattn_decode_bf16kfv_d512, sm_90a): decode_bf16_d512's 8-warp block, sub-tiles, Q,
// softmax and merge (kernels/decode_bf16_d512/traits.h), each warp's ring holding V chunks only
// (a sub-tile's two halves of the dims), and the K operand of each sub-tile built in registers
// from its V with the arithmetic of kernels/common/k_from_v.h; the block stages k_norm's weight
// (fp32, and bf16 when every weight is a bf16 value) and the RoPE frequencies in shared memory.
#pragma once

#include <cstdint>

#include "kernels/common/kernel_desc.h"
#include "kernels/decode_bf16_d512/traits.h"

namespace wideattn {

struct DecodeBf16KfvD512Traits : DecodeBf16Block<8> {
    // The pairs of RoPE: dim d and d + kHalfDim turn together. The chunks of a sub-tile split the
    // dims at kHalfDim, so the same place of the two chunks' A fragments holds the two dims of a
    // pair, in the same lane.
    static constexpr int32_t kHalfDim = kHeadDim / 2;  // 256 = the frequencies
    // A sub-tile is two chunks of V (dims 0-255, then 256-511); its K comes from the same chunks.
    static constexpr int32_t kVChunksPerSubTile = kChunkParts;
    // K Q^T k-steps per ldmatrix.x4 of Q^T (two, as decode_bf16_d512's chunk_scores).
    static constexpr int32_t kKStepsPerQLoad = 2;
    static constexpr int32_t kQLoadsPerChunk = kChunkKSteps / kKStepsPerQLoad;  // 8
    // Rotated Q loads whose cos / sin table words are loaded before the sub-tile's unrotated Q
    // loads (keys.cuh): Gemma 4's 128 rotated dims (64 frequencies, 32 a Q load), 16 registers a Q
    // load; the ones past them load theirs where used.
    static constexpr int32_t kCosSinQLoadsAhead = 2;
    // At the top of step i a warp may ask the L2 for the cos / sin table rows of its sub-tile
    // i + kCosSinRowsAhead (CosSinTable::prefetch_rows, 4 KB with Gemma 4's 128 rotated dims); 0:
    // no prefetch (compiled out). Off here: one and two sub-tiles ahead made this kernel 4-5% and
    // 6-7% slower at 1 x 128k and no faster elsewhere (H100, 2026-12-07, NOTES.md), while
    // decode_e4m3kfvb_d512 gains 8-10% from it.
    static constexpr int32_t kCosSinRowsAhead = 0;

    // Ring: three slots of 8 KB per warp (decode_bf16_d512's). Chunk c of a warp is part c % 2 of
    // its sub-tile c / 2, in slot c % 3. Sub-tile i reads chunks 2i and 2i + 1 together (the K
    // build pairs their dims) while chunk 2i + 2 is in flight; chunk 2i + 3 is issued once P V
    // is done with chunk 2i, and 2i + 4 once it is done with 2i + 1.
    static constexpr int32_t kPrologueChunks = kRingChunks;
    static constexpr int32_t kChunksPendingAtSubTile = kPrologueChunks - kVChunksPerSubTile;  // 1

    // k_norm's weight (fp32 [512]) and inv_freq of the 256 frequencies (fp32, 0 from
    // rotary_dims / 2 on), staged once per block.
    static constexpr int32_t kWeightBytes = kHeadDim * 4;
    static constexpr int32_t kFreqBytes = kHalfDim * 4;
    // The same weights as bf16 (read as pairs of dims d, d + 1) when every one is a bf16 value.
    static constexpr int32_t kWeightBf16Bytes = kHeadDim * 2;

    struct SmemPlan {
        static constexpr int32_t kQ = 0;
        static constexpr int32_t kRings = kQ + kQBytes;
        static constexpr int32_t kMerge = kRings;  // reused after the key loop
        static constexpr int32_t kStats = kRings + kWarps * kWarpRingBytes;
        static constexpr int32_t kWeight = kStats + kStatsBytes;
        static constexpr int32_t kFreq = kWeight + kWeightBytes;
        static constexpr int32_t kWeightBf16 = kFreq + kFreqBytes;
        static constexpr int32_t kEnd = kWeightBf16 + kWeightBf16Bytes;
        static constexpr int32_t kBytes = kEnd;
    };
    static constexpr int32_t kSmemBytes = SmemPlan::kBytes;
    // At least one chunk of every warp in flight through the K build (the heavy part of a step).
    static constexpr int32_t kMinBytesInFlightKfv = kWarps * kChunksPendingAtSubTile * kChunkBytes;

    static_assert(kChunkParts == 2 && kChunkDims == kHalfDim, "a sub-tile's two chunks are the two halves of a pair");
    static_assert(kRingChunks == kVChunksPerSubTile + 1, "two chunks read, one in flight (the schedule above)");
    static_assert(kMinBytesInFlightKfv >= kMinBytesInFlight, "enough bytes in flight per SM");
    static_assert(kChunkKSteps % kKStepsPerQLoad == 0, "whole Q loads per chunk");
    static_assert(SmemPlan::kWeight % kVecBytes == 0 && SmemPlan::kFreq % kVecBytes == 0 &&
                      SmemPlan::kWeightBf16 % kVecBytes == 0,
                  "the tables are read by 4-, 8- and 16-byte shared loads");
    static_assert(kMergeBytes <= kWarps * kWarpRingBytes, "the merge area fits in the rings");
    static_assert(kSmemBytes <= kSmemLimitSm90, "must fit sm_90 shared memory (227 KB)");

    static constexpr KernelDesc desc = {
        "decode_bf16kfv_d512", "wideattn_decode_bf16kfv_d512",
        kBF16, kBF16, kBF16,
        kHeadDim, kHeadDim, kHeadDim,
        kGroup, kGroup,
        kTileTokens, kTileKeys, kGroup, kThreads, kSmemBytes, kMinSm,
        "varlen,paged,causal,gqa,lse,split_kv,single_token,k_from_v,k_from_v_only", kKindPrefill,
        "wideattn_decode_bf16kfv_d512_split"};
};

}  // namespace wideattn
