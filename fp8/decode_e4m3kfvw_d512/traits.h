// traits.h - compile-time constants of the FP8-wgmma form of the single-token decode kernel that
// rebuilds K from an e4m3 V-only cache (kernel wideattn_decode_e4m3kfvw_d512, sm_90a; a
// candidate): one block per (query token, KV head[, key split]) as decode_e4m3kfvb_d512, but two
// consumer warpgroups, each taking every other 64-key tile through its own cp.async ring in the
// 128-byte-swizzled K-major layout wgmma reads. Where a dim does not rotate the scores are the V
// codes (the A operand, from shared memory) against Q' = q w v_scale 2^a split into two e4m3 terms
// (m64n16k32 e4m3: 64 keys x 8 heads x 2 terms); where it rotates K is built as
// decode_e4m3kfvb_d512 builds it (bf16, mma.sync against bf16 Q); P is split into two e4m3 terms
// too and O^T += V^T P^T runs as m64n16k32 e4m3 with V^T in registers. The layout arithmetic is
// host/device (layout.h) for the CPU test tests/test_kfvw_layout.cpp.
#pragma once

#include <cstdint>

#include "fp8/decode_e4m3kfvb_d512/traits.h"
#include "kernels/common/kernel_desc.h"

namespace wideattn {

struct DecodeE4m3KfvWD512Traits : DecodeE4m3KfvBD512Traits {
    using KfvbTraits = DecodeE4m3KfvBD512Traits;

    // Two consumer warpgroups; warpgroup g takes the block's 64-key tiles g, g + 2, ...; its warp w
    // copies (and builds the rotated K of) the tile's 16 keys 16w .. 16w + 15, one page's.
    static constexpr int32_t kWarpGroups = 2;
    static constexpr int32_t kWarpsPerGroup = 4;
    static constexpr int32_t kWarpGroupThreads = kWarpsPerGroup * kWarpSize;
    static constexpr int32_t kGroupTileKeys = kWarpsPerGroup * kSubTileKeys;  // 64: the m of wgmma
    static_assert(kWarpGroups * kWarpsPerGroup == kWarps, "the block's 8 warps form the two warpgroups");

    // The key loop: a tile's P V waited for before the next tile's scores (decode_e4m3kfvwp_d512's
    // traits set it: the next tile's scores issued while it runs).
    static constexpr bool kPipelined = false;

    // The plain key loop loads the cos / sin table words of the next tile's first
    // kCosSinAheadBlocks rotated pair blocks (16 registers a block) right after a tile's scores;
    // the rest are loaded just before their build. The pipelined loop loads none ahead.
    static constexpr int32_t kCosSinAheadBlocks = 1;

    // Each warpgroup's ring: three 64-key stages (two in flight while one is read), a stage being
    // [64 keys][512 codes] as four 128-byte slabs [64 rows][128 bytes], the 16-byte vector v of row
    // r at vector (v % 8) ^ (r % 8) of its slab's row (wgmma's 128-byte swizzle, K-major).
    static constexpr int32_t kStages = 3;
    static constexpr int32_t kStagesInFlight = kStages - 1;
    static constexpr int32_t kSwizzleBytes = 128;
    static constexpr int32_t kVecsPerSlabRow = kSwizzleBytes / kVecBytes;  // 8
    static constexpr int32_t kAtomRows = 8;
    static constexpr int32_t kAtomBytes = kAtomRows * kSwizzleBytes;       // 1024
    static constexpr int32_t kSlabs = kRowBytes / kSwizzleBytes;           // 4
    static constexpr int32_t kStageSlabBytes = kGroupTileKeys * kSwizzleBytes;  // 8 KB
    static constexpr int32_t kStageBytes = kSlabs * kStageSlabBytes;       // 32 KB
    static constexpr int32_t kGroupRingBytes = kStages * kStageBytes;

    // Scores: one m64n16k32 e4m3 per 32-dim block (kDimBlock) that does not rotate; B is Q' as 16
    // rows (heads 0-7: the high terms, 8-15: the low terms) of 512 e4m3 in the stage's layout.
    static constexpr int32_t kScoreStepBytes = 32;
    static constexpr int32_t kTermColumns = 2 * kGroup;                    // 16: the n of both products
    static constexpr int32_t kFoldSlabBytes = kTermColumns * kSwizzleBytes;  // 2 KB
    static constexpr int32_t kFoldBytes = kSlabs * kFoldSlabBytes;         // 8 KB
    // Q' = q w v_scale 2^a with max |Q'| in [2^kFoldTopLog2, 2^(kFoldTopLog2 + 1)) over the unrotated
    // dims; a <= kFoldShiftMax keeps 2^a and 2^-a normal floats (a >= -120 always holds: the largest
    // finite float is below 2^128).
    static constexpr int32_t kFoldTopLog2 = 7;
    static constexpr int32_t kFoldShiftMax = 126;
    // The low term of a two-term e4m3 value x = hi + lo 2^-kLowTermLog2 is e4m3((x - hi)
    // 2^kLowTermLog2): |x - hi| <= 8 for |x| <= 256, so the scaled residual stays below 128.
    static constexpr int32_t kLowTermLog2 = 4;
    static constexpr float kLowTermScale = 16.0f;    // 2^kLowTermLog2
    static constexpr float kLowTermWeight = 0.0625f;  // 2^-kLowTermLog2

    // P V: O^T (512 dims x 16 terms) += V^T P^T, one m64n16k32 e4m3 per 64-dim block and 32 keys;
    // warp w of a warpgroup holds the dims of 16-byte vector 4 D + w of dim block D (rows g: dim
    // 2g of the vector, rows g + 8: dim 2g + 1). P^T of a tile is K-major without swizzle: core
    // matrices of 8 columns x 16 keys (128 contiguous bytes), the column's 16 keys in the order of
    // the V^T fragments (pv_key_position, layout.h); the core matrix of key group k (16 keys) and
    // column group n (8 columns) at (2 k + n) x 128 bytes.
    static constexpr int32_t kPvDimBlock = 64;
    static constexpr int32_t kPvDimBlocks = kHeadDim / kPvDimBlock;        // 8
    static constexpr int32_t kPvStepKeys = 32;
    static constexpr int32_t kPvSteps = kGroupTileKeys / kPvStepKeys;      // 2
    static constexpr int32_t kCoreBytes = kAtomRows * kVecBytes;           // 128
    static constexpr int32_t kPLeadingBytes = 2 * kCoreBytes;              // next 16 keys
    static constexpr int32_t kPStrideBytes = kCoreBytes;                   // next 8 columns
    static constexpr int32_t kPvStepBytes = 2 * kPLeadingBytes;            // next 32 keys
    static constexpr int32_t kPTileBytes = kTermColumns * kGroupTileKeys;  // 1 KB

    // The tile maxima each warp posts for the warpgroup (fp32 [group][warp][head]).
    static constexpr int32_t kMaxSlotBytes = kWarps * kGroup * 4;
    // The end merge: each warpgroup's O (fp32 [group][row][dim]) over the rings.
    static constexpr int32_t kGroupMergeBytes = kWarpGroups * kRows * kMergeRowBytes;

    static constexpr int32_t kSmemAlign = 1024;  // 128-byte swizzle atoms must be 1024-byte aligned

    struct SmemPlan {
        static constexpr int32_t kRings = 0;
        static constexpr int32_t kMerge = kRings;  // reused after the key loop
        static constexpr int32_t kFold = kRings + kWarpGroups * kGroupRingBytes;
        static constexpr int32_t kQ = kFold + kFoldBytes;
        static constexpr int32_t kPTiles = kQ + kQBytes;
        static constexpr int32_t kWeight = kPTiles + kWarpGroups * kPTileBytes;
        static constexpr int32_t kFreq = kWeight + kWeightBytes;
        static constexpr int32_t kWeightProducts = kFreq + kFreqBytes;
        static constexpr int32_t kMaxSlots = kWeightProducts + kWeightProductBytes;
        static constexpr int32_t kStats = kMaxSlots + kMaxSlotBytes;
        static constexpr int32_t kAmax = kStats + kStatsBytes;
        static constexpr int32_t kEnd = kAmax + kAmaxBytes;
        static constexpr int32_t kBytes = kEnd + kSmemAlign;  // the base is aligned up by the block
    };
    static constexpr int32_t kSmemBytes = SmemPlan::kBytes;

    static_assert(kDimBlock == kScoreStepBytes, "one score k-step is one 32-dim block");
    static_assert(kStageBytes % kSmemAlign == 0 && SmemPlan::kFold % kSmemAlign == 0,
                  "stages and Q' start on swizzle atoms");
    static_assert(SmemPlan::kPTiles % kCoreBytes == 0, "P tiles start on core matrices");
    static_assert(SmemPlan::kQ % kVecBytes == 0 && SmemPlan::kWeight % kVecBytes == 0 &&
                      SmemPlan::kFreq % kVecBytes == 0 && SmemPlan::kWeightProducts % 8 == 0,
                  "the tables and Q are read by 16- and 8-byte shared loads");
    static_assert(kGroupMergeBytes <= kWarpGroups * kGroupRingBytes, "the merge area fits in the rings");
    static_assert(kPvDimBlock == kWarpsPerGroup * kVecBytes, "a P V dim block is one vector per warp");
    static_assert(kSmemBytes <= kSmemLimitSm90, "must fit sm_90 shared memory (227 KB)");

    static constexpr KernelDesc desc = {
        "decode_e4m3kfvw_d512", "wideattn_decode_e4m3kfvw_d512",
        kBF16, kE4M3, kBF16,
        kHeadDim, kHeadDim, kHeadDim,
        kGroup, kGroup,
        kTileTokens, kTileKeys, kGroup, kThreads, kSmemBytes, kMinSm,
        "varlen,paged,causal,gqa,lse,fp8_kv,split_kv,single_token,k_from_v,k_from_v_only", kKindPrefill,
        "wideattn_decode_e4m3kfvw_d512_split"};
};

}  // namespace wideattn
