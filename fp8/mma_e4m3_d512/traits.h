// traits.h - every compile-time constant of the 8-bit mma.sync prefill kernel for head dim 512
// and GQA group 8 (kernels wideattn_mma_e4m3_d512 and wideattn_mma_e4m3q_d512).
// Read by the kernel sources and by the manifest generator; one set of constants builds
// sm_89, sm_90a, sm_120a.
//
// Same block decomposition as the BF16 kernel, from the base they share
// (kernels/common/mma_block_traits.h): 64 query rows = 8 tokens x the 8 query heads of one KV
// head; warp w owns the 16-row m-tile w / 2 and the half w % 2 of the 512 dims; the warps of
// a pair add their partial scores through shared memory. Differences: K/V are e4m3 bytes, Q
// is quantised to e4m3 in registers, both products use mma.sync m16n8k32 e4m3, and a key
// tile is 32 keys (the k extent of one P V mma), so one K or V chunk is still 16 KB.
#pragma once

#include "kernels/common/kernel_desc.h"
#include "kernels/common/mma_block_traits.h"

namespace wideattn {

struct MmaE4m3D512Traits : MmaD512BlockTraits {
    // mma.sync.m16n8k32 e4m3 shape: k extent (m16n8 in the base).
    static constexpr int32_t kMmaK = 32;

    // Key tiles: 32 keys = one k-step of P V. block_size is only a multiple of 16, so a tile
    // is two page runs of 16 keys, each located through the block table on its own.
    static constexpr int32_t kTileKeys = kMmaK;
    static constexpr int32_t kPageRunKeys = kPageSizeMultiple;
    static constexpr int32_t kPageRunsPerTile = kTileKeys / kPageRunKeys;

    // Shared-memory ring of chunks (a chunk = the K or the V of one key tile, [32][512] e4m3).
    static constexpr int32_t kRingSlots = 5;  // issue schedule of mainloop.cuh
    static constexpr int32_t kElemBytes = 1;  // e4m3
    static constexpr int32_t kRowBytes = kHeadDim * kElemBytes;
    static constexpr int32_t kChunkBytes = kTileKeys * kRowBytes;
    static constexpr int32_t kVecBytes = 16;  // one cp.async / one ldmatrix row
    static constexpr int32_t kVecsPerRow = kRowBytes / kVecBytes;
    static constexpr int32_t kSwizzleSpanBytes = kSwizzleRows * kVecBytes;
    static constexpr int32_t kHalfRowBytes = kDimsPerWarp * kElemBytes;

    // Fragment counts per warp.
    static constexpr int32_t kQkSteps = kDimsPerWarp / kMmaK;      // k-steps of Q K^T (8)
    static constexpr int32_t kKeyNTiles = kTileKeys / kMmaN;       // n-tiles of the scores (4)
    static constexpr int32_t kKeyHalfRows = kTileKeys / 2;         // keys per ldmatrix.x4 of K (16)
    static constexpr int32_t kPvDimBlocks = kDimsPerWarp / kVecBytes;  // 16-dim blocks of P V (16)
    static constexpr int32_t kDimNTiles = 2 * kPvDimBlocks;        // O n-tiles: even / odd dims of a block

    // Shared memory plan (byte offsets from the dynamic shared memory base): the ring, then the
    // partial-score exchange.
    static constexpr int32_t kRingBytes = kRingSlots * kChunkBytes;
    static constexpr int32_t kExchangeBytes = exchange_bytes(kTileKeys);
    struct SmemPlan {
        static constexpr int32_t kRing = 0;
        static constexpr int32_t kExchange = kRing + kRingBytes;
        static constexpr int32_t kBytes = kExchange + kExchangeBytes;
    };
    static constexpr int32_t kSmemBytes = SmemPlan::kBytes;

    // e4m3 range and the quantisation targets.
    static constexpr float kE4m3Max = 448.0f;
    static constexpr float kQTargetMax = kE4m3Max;  // |Q| row-half maximum maps to 448
    // P is produced as 2^(s - max + kProbScaleLog2), i.e. already multiplied by 2^8 = 256:
    // the largest probability of a row is 256 (normal e4m3, 3 mantissa bits), and values
    // down to 2^-14 of the row maximum stay normal instead of flushing into subnormals. The
    // factor cancels in O / l; the LSE subtracts it.
    static constexpr float kProbScaleLog2 = 8.0f;
    // Lazy rescale threshold (log2). P reaches 2^(threshold + kProbScaleLog2), which must
    // stay <= 448: exact rescale (0) whenever a row maximum grows.
    static constexpr float kRescaleThresholdLog2 = 0.0f;
    // Two-level P V accumulation: every tile's P V goes into a fresh accumulator that is
    // added to O with fp32 adds (the e4m3 mma accumulator is narrower than fp32 on sm_89 /
    // sm_90; see NOTES.md).
    static constexpr bool kTwoLevelPv = true;
    // A __syncwarp after every this many 16-dim blocks of P V stops ptxas from hoisting the
    // V ldmatrix of the whole loop ahead of the mma (which spilled on sm_89 / sm_90a at the
    // 255-register cap); 4 blocks = 16 B-fragment registers in flight. 0 spill bytes on
    // sm_89, sm_90a and sm_120a with 4 (2 also; 8 spills).
    static constexpr int32_t kPvBlocksPerWarpSync = 4;

    static constexpr int32_t kMinSm = 89;  // mma.sync e4m3 and cvt e4m3x2

    static_assert(kKeyNTiles == 4 && kTileKeys == 2 * kKeyHalfRows, "two ldmatrix.x4 of K per k-step");
    static_assert(kQkSteps % 4 == 0 && kPvDimBlocks % kSwizzleRows == 0, "swizzle period divides the half");
    static_assert(kPvDimBlocks % kPvBlocksPerWarpSync == 0, "whole groups of P V blocks");
    static_assert(kPageRunsPerTile == 2, "issue_chunk handles exactly two page runs per tile");
    static_assert(kRingSlots == 5, "the issue schedule of mainloop.cuh needs exactly 5 slots");
    static_assert(kRescaleThresholdLog2 + kProbScaleLog2 <= 8.807f, "P must stay <= 448 (2^8.807)");
    static_assert(kSmemBytes <= kSmemLimitSm120, "must fit sm_120 / sm_89 shared memory (99 KB)");

    static constexpr KernelDesc desc = prefill_desc("mma_e4m3_d512", "wideattn_mma_e4m3_d512", kBF16, kE4M3,
                                                    kTileKeys, kSmemBytes, kMinSm,
                                                    "varlen,paged,causal,gqa,lse,fp8_kv,split_kv", "wideattn_mma_e4m3_d512_split");
};

// The same kernel for callers whose Q is already e4m3 (per-tensor scale *q_scale, e.g. from
// wideattn_quantize_to_cache with slot_mapping = NULL): every constant is shared, only the
// descriptor differs.
struct MmaE4m3QD512Traits : MmaE4m3D512Traits {
    static constexpr KernelDesc desc = prefill_desc("mma_e4m3q_d512", "wideattn_mma_e4m3q_d512", kE4M3, kE4M3,
                                                    kTileKeys, kSmemBytes, kMinSm,
                                                    "varlen,paged,causal,gqa,lse,fp8_kv,fp8_q,split_kv", "wideattn_mma_e4m3q_d512_split");
};

}  // namespace wideattn
