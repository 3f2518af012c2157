// traits.h - the compile-time constants of the K-from-V decode blocks whose warps share sub-tiles
// (DecodeBf16KfvSplitBlock<kDimSplit, kSets, kRingSlots>), and of decode_bf16kfvw12_d512 (kernel
// wideattn_decode_bf16kfvw12_d512, sm_90a), a candidate form of the BF16 K-from-V decode kernel
// (kernels/decode_bf16kfv_d512/) with twelve warps: two warps share each 16-key sub-tile, each
// building K from, scoring with and multiplying P by half of the head dims (every other 16-dim
// k-step of both halves, so each warp holds both dims of its RoPE pairs and half of the rotated
// k-steps), and keeping half of O. The warps' partial scores meet in shared memory
// (block.cuh), so every warp of a sub-tile runs the same softmax on the same sums. Six such pairs
// stream their own sub-tiles; one block per SM, 12 warps (3 a scheduler, against 2 for
// decode_bf16kfv_d512, whose warps the Nsight Compute profile of 2026-12-05 found bound by their
// serial chain), at most 168 registers a thread. decode_bf16kfvw16_d512 is the same block with
// four warps a sub-tile (kernels/decode_bf16kfvw16_d512/traits.h).
#pragma once

#include <cstdint>

#include "kernels/common/kernel_desc.h"

namespace wideattn {

template <int32_t kDimSplitValue, int32_t kSetsValue, int32_t kRingSlotsValue>
struct DecodeBf16KfvSplitBlock {
    static constexpr int32_t kHeadDim = 512;
    static constexpr int32_t kGroup = 8;  // query heads per KV head = the block's rows
    static constexpr int32_t kRows = kGroup;
    static constexpr int32_t kWarpSize = 32;
    static constexpr int32_t kTileTokens = 1;        // one query token per block
    static constexpr int32_t kTokensPerRowTile = 1;  // block_geometry: every row is the block's token

    // Warps sharing a sub-tile (a set: its barrier id is 1 + warp / kDimSplit), and the sets.
    static constexpr int32_t kDimSplit = kDimSplitValue;
    static constexpr int32_t kSets = kSetsValue;
    static constexpr int32_t kWarps = kSets * kDimSplit;
    static constexpr int32_t kThreads = kWarps * kWarpSize;

    static constexpr int32_t kSubTileKeys = kPageSizeMultiple;  // never straddles a page
    static constexpr int32_t kTileKeys = kSubTileKeys;
    static constexpr int32_t kMmaM = 16;
    static constexpr int32_t kMmaK = 16;
    static constexpr int32_t kVecBytes = 16;  // one cp.async, one ldmatrix row
    static constexpr int32_t kElemBytes = 2;  // bf16
    static constexpr int32_t kSwizzleRows = 8;

    // RoPE pairs: dim d and d + kHalfDim turn together. K-step j of the low half (dims 16j ..
    // 16j + 15) and k-step j of the high half hold the two dims of 16 pairs; warp `rank` of a
    // set takes k-steps j = kDimSplit ls + rank, ls < kWarpSteps, of both halves.
    static constexpr int32_t kHalfDim = kHeadDim / 2;
    static constexpr int32_t kHalfKSteps = kHalfDim / kMmaK;            // 16
    static constexpr int32_t kWarpSteps = kHalfKSteps / kDimSplit;      // of each half, a warp
    static constexpr int32_t kHalfVecs = kHalfDim * kElemBytes / kVecBytes;  // 32 vectors a half row
    // The O^T m-tiles of a warp: local tile c = half x kWarpSteps + ls holds dims 16 n .. 16 n + 15,
    // n = half x kHalfKSteps + kDimSplit ls + rank (o_tile).
    static constexpr int32_t kONTiles = 2 * kWarpSteps;
    static constexpr int32_t kOHalfDims = kMmaM / 2;

    // A warp's slot: the 16 key rows of its dims of one sub-tile, 64 / kDimSplit vectors a row:
    // local vector v is global vector global_vec(v, rank) (the vectors of its local tile v / 2);
    // lane l copies local vector l % kVecsPerChunkRow of keys l / kVecsPerChunkRow, +
    // kKeysPerCopy, ... Swizzled as a decode_bf16_d512 chunk (vector v of row r at v ^ (r % 8)),
    // so an ldmatrix of local k-step c reads vectors 2c, 2c + 1 (chunk_row_address).
    static constexpr int32_t kChunkRowBytes = 2 * kWarpSteps * kMmaK * kElemBytes;
    static constexpr int32_t kVecsPerChunkRow = kChunkRowBytes / kVecBytes;
    static constexpr int32_t kKeysPerCopy = kWarpSize / kVecsPerChunkRow;  // key rows a warp's copy covers
    static constexpr int32_t kChunkBytes = kSubTileKeys * kChunkRowBytes;
    // kRingSlots slots a warp: sub-tile i is read while the next kRingSlots - 1 are in flight;
    // i + kRingSlots is issued into i's slot once P V is done with it.
    static constexpr int32_t kRingSlots = kRingSlotsValue;
    static constexpr int32_t kWarpRingBytes = kRingSlots * kChunkBytes;

    // Q: the 8 rows as bf16, 1 KB rows, vectors swizzled by row.
    static constexpr int32_t kQRowBytes = kHeadDim * kElemBytes;
    static constexpr int32_t kQBytes = kRows * kQRowBytes;
    static constexpr int32_t kQVecsPerRow = kQRowBytes / kVecBytes;  // 64

    // Softmax (decode_e4m3_d512's): log2 units, P in bf16, no offset.
    static constexpr float kProbScaleLog2 = 0.0f;
    static constexpr bool kBf16Probs = true;

    // Rotated k-steps of a warp whose table words are loaded before its unrotated k-steps (keys.cuh):
    // Gemma 4's 128 rotated dims are 4 k-steps, 4 / kDimSplit a warp.
    static constexpr int32_t kCosSinStepsAhead = (4 + kDimSplit - 1) / kDimSplit;

    // The partial scores: a float4 a lane, per parity of the sub-tile (two buffers, so a warp
    // writing sub-tile i + 2's part finds its partner past reading sub-tile i's).
    static constexpr int32_t kExchangeBufferBytes = kWarps * kWarpSize * 16;
    static constexpr int32_t kExchangeBytes = 2 * kExchangeBufferBytes;

    // The end of the block: each set's row maxima and sums and its O^T (fp32 [set][row][dim],
    // each warp writing its dims), over the rings once every warp is done.
    static constexpr int32_t kMergeRowBytes = kHeadDim * 4;
    static constexpr int32_t kMergeBytes = kSets * kRows * kMergeRowBytes;
    static constexpr int32_t kStatsBytes = kSets * kRows * 2 * 4;

    // k_norm's weight (fp32 [512] and its bf16 copy) and the 256 frequencies' inv_freq (fp32).
    static constexpr int32_t kWeightBytes = kHeadDim * 4;
    static constexpr int32_t kFreqBytes = kHalfDim * 4;
    static constexpr int32_t kWeightBf16Bytes = kHeadDim * 2;

    struct SmemPlan {
        static constexpr int32_t kQ = 0;
        static constexpr int32_t kRings = kQ + kQBytes;
        static constexpr int32_t kMerge = kRings;  // reused after the key loop
        static constexpr int32_t kExchange = kRings + kWarps * kWarpRingBytes;
        static constexpr int32_t kStats = kExchange + kExchangeBytes;
        static constexpr int32_t kWeight = kStats + kStatsBytes;
        static constexpr int32_t kFreq = kWeight + kWeightBytes;
        static constexpr int32_t kWeightBf16 = kFreq + kFreqBytes;
        static constexpr int32_t kEnd = kWeightBf16 + kWeightBf16Bytes;
        static constexpr int32_t kBytes = kEnd;
    };
    static constexpr int32_t kSmemBytes = SmemPlan::kBytes;
    static constexpr int32_t kSmemAlign = 128;
    static constexpr int32_t kMinSm = 90;

    // The global m-tile (16 dims) of a warp's local tile c (see kONTiles).
    WIDEATTN_HOST_DEVICE static constexpr int32_t o_tile(int32_t c, int32_t rank) {
        return (c / kWarpSteps) * kHalfKSteps + kDimSplit * (c % kWarpSteps) + rank;
    }
    // The global 16-byte vector of a key row that a warp's local vector v holds (see kChunkRowBytes).
    WIDEATTN_HOST_DEVICE static constexpr int32_t global_vec(int32_t v, int32_t rank) {
        return 2 * o_tile(v / 2, rank) + v % 2;
    }

    // The local k-steps of warp `rank` that hold a dim that may rotate (dims below rotary_dims / 2,
    // their partners kHalfDim on): global k-steps below ceil(rotary_dims / 2 / 16), of which the
    // warp's are kDimSplit ls + rank, a prefix ls < rotated_local_steps.
    WIDEATTN_HOST_DEVICE static constexpr int32_t rotated_local_steps(int32_t rotary_dims, int32_t rank) {
        const int32_t steps = (rotary_dims / 2 + kMmaK - 1) / kMmaK;
        const int32_t rotated = steps < kHalfKSteps ? steps : kHalfKSteps;
        return rotated > rank ? (rotated - rank + kDimSplit - 1) / kDimSplit : 0;
    }

    static_assert(kHalfKSteps % kDimSplit == 0, "the k-steps of a half split evenly");
    static_assert(kWarpSize % kVecsPerChunkRow == 0 && kSubTileKeys % kKeysPerCopy == 0,
                  "a warp's copy covers whole key rows of a slot");
    static_assert(kSubTileKeys == kMmaM, "a sub-tile is the m of one mma");
    static_assert(kThreads >= kHalfDim, "the tables are staged one frequency and two weights a thread");
    static_assert(kMergeBytes <= kWarps * kWarpRingBytes, "the merge area fits in the rings");
    static_assert(SmemPlan::kRings % kSmemAlign == 0 && kChunkBytes % kSmemAlign == 0, "slots stay aligned");
    static_assert(SmemPlan::kExchange % 16 == 0 && SmemPlan::kWeight % kVecBytes == 0 &&
                      SmemPlan::kFreq % kVecBytes == 0 && SmemPlan::kWeightBf16 % kVecBytes == 0,
                  "float4 exchange and vector table reads stay aligned");
    static_assert(kSmemBytes <= kSmemLimitSm90, "must fit sm_90 shared memory (227 KB)");
    static_assert(kSets + 1 <= 16, "named barriers 1 .. kSets (0 is the block's)");
    static_assert(kRingSlots >= 2, "one slot read while the next is in flight");
};

// decode_bf16kfvw12_d512: pairs of warps, six pairs, two 8 KB slots a warp (12 warps x 8 KB in
// flight an SM; Little's law at 4.3 TB/s asks for 20-26 KB).
struct DecodeBf16KfvW12D512Traits : DecodeBf16KfvSplitBlock<2, 6, 2> {
    static constexpr KernelDesc desc = {
        "decode_bf16kfvw12_d512", "wideattn_decode_bf16kfvw12_d512",
        kBF16, kBF16, kBF16,
        kHeadDim, kHeadDim, kHeadDim,
        kGroup, kGroup,
        kTileTokens, kTileKeys, kGroup, kThreads, kSmemBytes, kMinSm,
        "varlen,paged,causal,gqa,lse,split_kv,single_token,k_from_v,k_from_v_only", kKindPrefill,
        "wideattn_decode_bf16kfvw12_d512_split"};
};

}  // namespace wideattn
