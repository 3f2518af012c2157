// mma_traits.h - every compile-time constant of the BF16 mma.sync prefill kernel for head
// dim 512 and GQA group 8 (kernel wideattn_mma_bf16_d512). Read by the kernel sources and
// by the manifest generator; the same constants build every arch (sm_80 .. sm_120a).
//
// Block layout: 64 query rows = 8 tokens x the 8 query heads of one KV head, row
// r = token_in_tile * 8 + head_in_group. Eight warps: warp w owns the 16-row m-tile w / 2
// and the half w % 2 of the 512 dims (Q and O of that half live in its registers). The two
// warps of a pair add their partial scores through shared memory. K/V stream through a
// ring of 16-key chunks (one chunk = the K or the V of one key tile) filled with cp.async.
#pragma once

#include "kernels/common/kernel_desc.h"

namespace wideattn {

struct MmaBf16D512Traits {
    // Problem shape served.
    static constexpr int32_t kHeadDim = 512;
    static constexpr int32_t kGroup = 8;         // query heads per KV head = rows per token
    static constexpr int32_t kTileTokens = 8;    // query tokens per block
    static constexpr int32_t kRowsPerBlock = kTileTokens * kGroup;

    // mma.sync.m16n8k16 shape.
    static constexpr int32_t kMmaM = 16;
    static constexpr int32_t kMmaN = 8;
    static constexpr int32_t kMmaK = 16;

    // Warp decomposition.
    static constexpr int32_t kWarpSize = 32;
    static constexpr int32_t kWarps = 8;
    static constexpr int32_t kThreads = kWarps * kWarpSize;
    static constexpr int32_t kDimSplit = 2;                        // warps sharing one m-tile
    static constexpr int32_t kDimsPerWarp = kHeadDim / kDimSplit;  // Q/O columns per warp
    static constexpr int32_t kRowTiles = kRowsPerBlock / kMmaM;    // m-tiles per block
    static constexpr int32_t kTokensPerRowTile = kMmaM / kGroup;   // tokens in one m-tile
    // Ping-pong (when kPingPong): warps 0..3 (group 0) run Q K^T, softmax, P V of key tile
    // j; warps 4..7 (group 1) run P V of tile j-1, then Q K^T and softmax of tile j, so one
    // group's softmax overlaps the other's matrix products. Measured slower on the H200
    // (it shortens the K/V prefetch distance; see NOTES.md), so off.
    static constexpr bool kPingPong = false;
    static constexpr int32_t kWarpGroups = 2;
    static constexpr int32_t kWarpsPerGroup = kWarps / kWarpGroups;
    // Independent accumulator chains per score n-tile in Q K^T (k-steps alternate between
    // them) to shorten the dependent mma.sync chain. 2 measured within 0.5% of 1 on the H200
    // and costs 8 registers (spills on some archs), so 1.
    static constexpr int32_t kQkChains = 1;

    // Key tiles and the shared-memory ring.
    static constexpr int32_t kTileKeys = 16;
    static constexpr int32_t kRingSlots = 5;  // see the issue schedule in mma_mainloop.cuh
    static constexpr int32_t kElemBytes = 2;  // bf16
    static constexpr int32_t kChunkElems = kTileKeys * kHeadDim;
    static constexpr int32_t kChunkBytes = kChunkElems * kElemBytes;
    static constexpr int32_t kVecElems = 8;  // bf16 per 16-byte cp.async
    static constexpr int32_t kVecsPerRow = kHeadDim / kVecElems;
    static constexpr int32_t kSwizzleRows = 8;  // 16-byte column index XOR (row % 8)

    // Fragment counts per warp.
    static constexpr int32_t kQkSteps = kDimsPerWarp / kMmaK;     // k-steps of Q K^T
    static constexpr int32_t kKeyNTiles = kTileKeys / kMmaN;      // n-tiles of the scores
    static constexpr int32_t kPvSteps = kTileKeys / kMmaK;        // k-steps of P V
    static constexpr int32_t kDimNTiles = kDimsPerWarp / kMmaN;   // n-tiles of O

    // Partial-score exchange: one fp32 16 x kTileKeys tile per warp.
    static constexpr int32_t kExchangeFloatsPerWarp = kMmaM * kTileKeys;
    static constexpr int32_t kExchangeBytes = kWarps * kExchangeFloatsPerWarp * 4;

    static constexpr int32_t kRingBytes = kRingSlots * kChunkBytes;
    static constexpr int32_t kSmemBytes = kRingBytes + kExchangeBytes;

    // Lazy softmax rescale: O and the row sum are rescaled only when a row maximum grows by
    // more than this many powers of two (exact result; bounds P by 2^threshold).
    static constexpr float kRescaleThresholdLog2 = 8.0f;

    static_assert(kRowTiles * kDimSplit == kWarps, "one warp per (m-tile, dim half)");
    static_assert(kMmaM % kGroup == 0, "an m-tile holds whole tokens");
    static_assert(kDimsPerWarp % (2 * kMmaK) == 0, "ldmatrix.x4 covers two k-steps of K");
    static_assert(kTileKeys % kMmaK == 0 && kKeyNTiles == 2 && kPvSteps == 1,
                  "score tile is one ldmatrix.x4 of K per k-step and one P fragment");
    static_assert(kRingSlots == 5, "both issue schedules of mma_mainloop.cuh need exactly 5 slots");
    static_assert(kTileKeys == 16, "block_size is only guaranteed to be a multiple of 16: a key tile must "
                                   "never straddle a page");
    static_assert(kWarpsPerGroup * kWarpGroups == kWarps && kWarpsPerGroup % kDimSplit == 0,
                  "warp pairs never straddle the ping-pong groups");
    static_assert(kQkSteps % kQkChains == 0, "k-steps split evenly over the accumulator chains");
    static_assert(kSmemBytes <= kSmemLimitSm120, "must fit sm_120 / sm_89 / sm_86 shared memory");
    static_assert(kSmemBytes <= kSmemLimitSm80, "must fit sm_80 shared memory");

    static constexpr KernelDesc desc = {
        "mma_bf16_d512", "wideattn_mma_bf16_d512",
        kBF16, kBF16, kBF16,
        kHeadDim, kHeadDim, kHeadDim,
        kGroup, kGroup,
        kTileTokens, kTileKeys, kGroup, kThreads, kSmemBytes, 80,
        "varlen,paged,causal,gqa,lse", kKindPrefill};
};

}  // namespace wideattn
