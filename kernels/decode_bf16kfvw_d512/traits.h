// traits.h - compile-time constants of the wgmma form of the single-token decode kernel that
// rebuilds K from a BF16 V-only cache (kernel wideattn_decode_bf16kfvw_d512, sm_90a; a candidate):
// one block per (query token, KV head[, key split]) as decode_bf16kfv_d512, two consumer
// warpgroups working on the same 64-key tile, split by dims (warpgroup g: dims 256 g .. 256 g +
// 255), through one block-wide cp.async ring in the 128-byte-swizzled K-major layout wgmma reads.
// Where a dim does not rotate the scores are V (the A operand, from shared memory) against Q' = q w
// as two bf16 terms (m64n16k16 bf16: 64 keys x 8 heads x 2 terms); where it rotates K is built as
// decode_bf16kfv_d512 builds it (mma.sync against bf16 Q); the two warpgroups' partial scores meet
// in shared memory; O^T += V^T P^T by m64n8k16 bf16 with V^T read transposed from the stage. The
// layout arithmetic is host/device (layout.h) for the CPU test tests/test_kfvw_bf16_layout.cpp.
#pragma once

#include <cstdint>

#include "kernels/common/kernel_desc.h"
#include "kernels/decode_bf16kfv_d512/traits.h"

namespace wideattn {

struct DecodeBf16KfvWD512Traits : DecodeBf16KfvD512Traits {
    // Two consumer warpgroups on the same tile. Warpgroup g holds O^T of dims 256 g .. 256 g + 255;
    // its warp w builds the rotated K of the tile's keys 16 w .. 16 w + 15 (the m of mma.sync).
    static constexpr int32_t kWarpGroups = 2;
    static constexpr int32_t kWarpsPerGroup = 4;
    static constexpr int32_t kWarpGroupThreads = kWarpsPerGroup * kWarpSize;
    static constexpr int32_t kTileKeysW = kWarpsPerGroup * kSubTileKeys;  // 64: the m of wgmma
    static constexpr int32_t kGroupDims = kHeadDim / kWarpGroups;          // 256
    static_assert(kWarpGroups * kWarpsPerGroup == kWarps, "the block's 8 warps form the two warpgroups");

    // The ring: three 64-key stages (two in flight while one is read), a stage being [64 keys][512
    // bf16] as eight 128-byte slabs [64 rows][128 bytes] (64 dims each), the 16-byte vector v of
    // row r at vector (v % 8) ^ (r % 8) of its slab's row (wgmma's 128-byte swizzle, K-major).
    // Warp w of the block copies the tile's 16-key sub-tile w / 2 (one page), vectors 32 (w % 2) ..
    // 32 (w % 2) + 31 of each key row, lane l one of them.
    static constexpr int32_t kStages = 3;
    static constexpr int32_t kStagesInFlight = kStages - 1;
    static constexpr int32_t kSwizzleBytes = 128;
    static constexpr int32_t kVecsPerSlabRow = kSwizzleBytes / kVecBytes;  // 8
    static constexpr int32_t kVecsPerRow = kRowBytes / kVecBytes;          // 64
    static constexpr int32_t kAtomRows = 8;
    static constexpr int32_t kAtomBytes = kAtomRows * kSwizzleBytes;       // 1024
    static constexpr int32_t kSlabs = kRowBytes / kSwizzleBytes;           // 8
    static constexpr int32_t kSlabDims = kSwizzleBytes / kElemBytes;       // 64
    static constexpr int32_t kStageSlabBytes = kTileKeysW * kSwizzleBytes;  // 8 KB
    static constexpr int32_t kStageBytes = kSlabs * kStageSlabBytes;       // 64 KB
    static constexpr int32_t kRingBytes = kStages * kStageBytes;           // 192 KB
    static constexpr int32_t kSubTilesPerTile = kTileKeysW / kSubTileKeys;  // 4
    static constexpr int32_t kCopyWarpsPerSubTile = kWarps / kSubTilesPerTile;  // 2
    static constexpr int32_t kCopyVecsPerWarp = kVecsPerRow / kCopyWarpsPerSubTile;  // 32: one a lane

    // Scores where dims do not rotate: one m64n16k16 bf16 per 16-dim block (kScoreStepBytes of a
    // slab row); B is Q' as 16 rows of 512 bf16 in the stage's layout: rows 0-7 the high terms of
    // heads 0-7, rows 8-15 the low terms. Where a dim rotates, rows 0-7 hold bf16 q itself (the
    // B fragments of the rotated mma.sync) and rows 8-15 zeros.
    static constexpr int32_t kScoreStepDims = 16;
    static constexpr int32_t kScoreStepBytes = kScoreStepDims * kElemBytes;  // 32
    static constexpr int32_t kScoreSteps = kHeadDim / kScoreStepDims;        // 32
    static constexpr int32_t kGroupScoreSteps = kScoreSteps / kWarpGroups;   // 16
    static constexpr int32_t kScoreStepsPerQLoad = kKStepsPerQLoad;          // a rotated Q load: 2 blocks
    static constexpr int32_t kTermColumns = 2 * kGroup;                      // 16: the n of the score product
    static constexpr int32_t kFoldSlabBytes = kTermColumns * kSwizzleBytes;  // 2 KB
    static constexpr int32_t kFoldBytes = kSlabs * kFoldSlabBytes;           // 16 KB

    // The partial scores a warpgroup posts for the other (fp32, 4 a thread: [group][thread][4]).
    static constexpr int32_t kExchangeBytes = kWarpGroups * kWarpGroupThreads * 4 * 4;
    // The tile maxima each warp posts for its warpgroup (fp32 [group][warp][head]).
    static constexpr int32_t kMaxSlotBytes = kWarps * kGroup * 4;

    // P V: O^T (the warpgroup's 256 dims x 8 heads) += V^T P^T, one m64n8k16 bf16 per 64-dim slab
    // and 16 keys, V^T read MN-major from the stage (64-dim slabs kStageSlabBytes apart, 8-key
    // atoms kAtomBytes apart). P^T (bf16 [head][key]) is K-major without swizzle: core matrices of
    // 8 heads x 8 keys (128 contiguous bytes), the one of keys 8 k .. 8 k + 7 at k x 128 bytes.
    static constexpr int32_t kPvDimBlock = kSlabDims;                       // 64: the m of wgmma
    static constexpr int32_t kPvDimBlocks = kGroupDims / kPvDimBlock;       // 4 a warpgroup
    static constexpr int32_t kPvStepKeys = 16;
    static constexpr int32_t kPvSteps = kTileKeysW / kPvStepKeys;           // 4
    static constexpr int32_t kCoreBytes = kAtomRows * kVecBytes;            // 128
    static constexpr int32_t kCoreKeys = kVecBytes / kElemBytes;            // 8
    static constexpr int32_t kPLeadingBytes = kCoreBytes;                   // next 8 keys
    static constexpr int32_t kPStrideBytes = (kTileKeysW / kCoreKeys) * kCoreBytes;  // next 8 heads (none)
    static constexpr int32_t kPvStepBytes = (kPvStepKeys / kCoreKeys) * kCoreBytes;   // next 16 keys
    static constexpr int32_t kPTileBytes = kGroup * kTileKeysW * kElemBytes;          // 1 KB

    static constexpr int32_t kSmemAlign = 1024;  // 128-byte swizzle atoms must be 1024-byte aligned

    // The bf16 Q tile (load_q's layout) is staged once in the ring's last stage, which the
    // prologue does not fill, and folded into Q' from there.
    struct SmemPlan {
        static constexpr int32_t kRing = 0;
        static constexpr int32_t kQStaging = kRing + (kStages - 1) * kStageBytes;
        static constexpr int32_t kMerge = kRing;  // reused after the key loop
        static constexpr int32_t kFold = kRing + kRingBytes;
        static constexpr int32_t kPTiles = kFold + kFoldBytes;
        static constexpr int32_t kExchange = kPTiles + kWarpGroups * kPTileBytes;
        static constexpr int32_t kWeight = kExchange + kExchangeBytes;
        static constexpr int32_t kFreq = kWeight + kWeightBytes;
        static constexpr int32_t kWeightBf16 = kFreq + kFreqBytes;
        static constexpr int32_t kMaxSlots = kWeightBf16 + kWeightBf16Bytes;
        static constexpr int32_t kStats = kMaxSlots + kMaxSlotBytes;
        static constexpr int32_t kEnd = kStats + kStatsBytes;
        static constexpr int32_t kBytes = kEnd + kSmemAlign;  // the base is aligned up by the block
    };
    static constexpr int32_t kSmemBytes = SmemPlan::kBytes;

    static_assert(kCopyVecsPerWarp == kWarpSize, "a lane copies one 16-byte vector of each key row");
    static_assert(kStageBytes % kSmemAlign == 0 && SmemPlan::kFold % kSmemAlign == 0,
                  "stages and Q' start on swizzle atoms");
    static_assert(SmemPlan::kPTiles % kCoreBytes == 0 && kPTileBytes % kCoreBytes == 0, "P tiles start on core matrices");
    static_assert(SmemPlan::kExchange % kVecBytes == 0 && SmemPlan::kWeight % kVecBytes == 0 &&
                      SmemPlan::kFreq % kVecBytes == 0 && SmemPlan::kWeightBf16 % kVecBytes == 0 &&
                      SmemPlan::kMaxSlots % 8 == 0 && SmemPlan::kStats % 8 == 0,
                  "the exchange and the tables are read by 16- and 8-byte shared loads");
    static_assert(kQBytes <= kStageBytes, "Q is staged in one stage");
    static_assert(kRows * kMergeRowBytes <= kRingBytes, "the output rows fit in the ring");
    static_assert(kGroupScoreSteps % kScoreStepsPerQLoad == 0, "a warpgroup's dims are whole Q loads");
    static_assert(kPvDimBlocks * kPvDimBlock == kGroupDims, "a warpgroup's dims are whole slabs");
    static_assert(kSmemBytes <= kSmemLimitSm90, "must fit sm_90 shared memory (227 KB)");

    static constexpr KernelDesc desc = {
        "decode_bf16kfvw_d512", "wideattn_decode_bf16kfvw_d512",
        kBF16, kBF16, kBF16,
        kHeadDim, kHeadDim, kHeadDim,
        kGroup, kGroup,
        kTileTokens, kTileKeys, kGroup, kThreads, kSmemBytes, kMinSm,
        "varlen,paged,causal,gqa,lse,split_kv,single_token,k_from_v,k_from_v_only", kKindPrefill,
        "wideattn_decode_bf16kfvw_d512_split"};
};

}  // namespace wideattn
