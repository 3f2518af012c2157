// wgmma_traits.h - every compile-time constant of the Hopper-tier BF16 prefill kernel for head
// dim 512 and GQA group 8 (kernel wideattn_wgmma_bf16_d512, sm_90a only). Read by the kernel
// sources and by the manifest generator.
//
// Block layout: 64 query rows = 8 tokens x the 8 query heads of one KV head, row
// r = token_in_tile * 8 + head_in_group (the same rows as the mma tier, so the causal, paged and
// varlen logic and the epilogue are shared). Two warpgroups: warpgroup g owns dims
// [256 g, 256 g + 256) of Q, K, V and O. Q and each K/V key tile live in shared memory in the
// 128-byte-swizzled layout wgmma reads; S = Q K^T runs as wgmma m64n32k16 (both operands from
// shared memory), the two warpgroups add their partial scores through shared memory, and
// O += P V runs as wgmma m64n256k16 with P from registers and V from shared memory
// (MN-major). Each warpgroup loads its own half of Q (cp.async) and of K and V (TMA issued by
// lane 0 of each of its warps, completion on mbarriers), so only the score exchange couples the
// two.
#pragma once

#include "kernels/common/kernel_desc.h"

namespace wideattn {

struct WgmmaBf16D512Traits {
    // Problem shape served.
    static constexpr int32_t kHeadDim = 512;
    static constexpr int32_t kGroup = 8;
    static constexpr int32_t kTileTokens = 8;
    static constexpr int32_t kRowsPerBlock = kTileTokens * kGroup;

    // Threads: two warpgroups, one per half of the head dims.
    static constexpr int32_t kWarpSize = 32;
    static constexpr int32_t kWarpGroupThreads = 128;
    static constexpr int32_t kWarpGroups = 2;
    static constexpr int32_t kThreads = kWarpGroups * kWarpGroupThreads;
    static constexpr int32_t kDimsPerGroup = kHeadDim / kWarpGroups;

    // wgmma shapes: m64 covers the block's 64 rows; k16 for bf16.
    static constexpr int32_t kWgmmaM = 64;
    static constexpr int32_t kWgmmaK = 16;
    static constexpr int32_t kTileKeys = 32;           // keys per step = N of the score wgmma
    static constexpr int32_t kRowsPerWarp = 16;        // accumulator rows of one warp
    static constexpr int32_t kTokensPerRowTile = kRowsPerWarp / kGroup;
    static constexpr int32_t kQkSteps = kDimsPerGroup / kWgmmaK;  // score wgmmas per step
    static constexpr int32_t kPvSteps = kTileKeys / kWgmmaK;      // P V wgmmas per step
    static constexpr int32_t kAccumN = 8;                          // columns per accumulator quad
    static constexpr int32_t kKeyNTiles = kTileKeys / kAccumN;
    static constexpr int32_t kDimNTiles = kDimsPerGroup / kAccumN;

    // Paging: block_size is a multiple of 16, so a key tile is loaded as 16-key sub-tiles that
    // each lie inside one page.
    static constexpr int32_t kPageKeys = 16;
    static constexpr int32_t kSubTiles = kTileKeys / kPageKeys;

    // 128-byte swizzle: an operand is stored as slabs of 64 dims (128 bytes per row); inside a
    // slab the 16-byte column c of row r sits at column c ^ (r % 8); 8-row atoms are 1024 bytes.
    static constexpr int32_t kElemBytes = 2;
    static constexpr int32_t kVecBytes = 16;
    static constexpr int32_t kVecElems = kVecBytes / kElemBytes;
    static constexpr int32_t kSwizzleBytes = 128;
    static constexpr int32_t kSlabDims = kSwizzleBytes / kElemBytes;
    static constexpr int32_t kVecsPerSlabRow = kSwizzleBytes / kVecBytes;
    static constexpr int32_t kAtomRows = 8;
    static constexpr int32_t kAtomBytes = kAtomRows * kSwizzleBytes;
    static constexpr int32_t kSlabsPerGroup = kDimsPerGroup / kSlabDims;
    static constexpr int32_t kVecsPerGroupRow = kDimsPerGroup / kVecElems;

    // Shared memory: Q, a ring of K/V chunks (one chunk = the K or the V of one key tile), the
    // score exchange (double-buffered by step parity, one fp32 64 x kTileKeys tile per warpgroup).
    static constexpr int32_t kQBytes = kRowsPerBlock * kHeadDim * kElemBytes;
    static constexpr int32_t kChunkBytes = kTileKeys * kHeadDim * kElemBytes;
    static constexpr int32_t kRingSlots = 4;  // K_j, V_j, K_j+1, V_j+1 (schedule in wgmma_mainloop.cuh)
    static constexpr int32_t kExchangeParities = 2;
    static constexpr int32_t kExchangeTileBytes = kRowsPerBlock * kTileKeys * 4;
    static constexpr int32_t kExchangeBytes = kExchangeParities * kWarpGroups * kExchangeTileBytes;
    static constexpr int32_t kSmemAlign = 1024;  // swizzle atoms must be 1024-byte aligned
    // K/V tiles arrive by TMA: one mbarrier per ring slot and warpgroup completes when the
    // warpgroup's half of the chunk (kGroupChunkBytes) has landed.
    static constexpr int32_t kGroupChunkBytes = kChunkBytes / kWarpGroups;
    static constexpr int32_t kBarrierBytes = 8;
    static constexpr int32_t kBarriersBytes = kRingSlots * kWarpGroups * kBarrierBytes;
    static constexpr int32_t kSmemBytes =
        kQBytes + kRingSlots * kChunkBytes + kExchangeBytes + kBarriersBytes + kSmemAlign;

    // Lazy softmax rescale (as the mma tier): exact, bounds P by 2^threshold.
    static constexpr float kRescaleThresholdLog2 = 8.0f;

    static_assert(kRowsPerBlock == kWgmmaM, "one wgmma m64 covers the block's rows");
    static_assert(kRowsPerWarp % kGroup == 0, "a warp's accumulator rows hold whole tokens");
    static_assert(kTileKeys % kPageKeys == 0, "a key tile is whole 16-key sub-tiles");
    static_assert(kDimsPerGroup % kSlabDims == 0, "a warpgroup's dims are whole 128-byte slabs");
    static_assert(kKeyNTiles % 2 == 0, "two score quads form one P fragment");
    static_assert(kWarpGroupThreads % kVecsPerGroupRow == 0, "whole rows per load pass");
    static_assert(kSmemBytes <= kSmemLimitSm90, "must fit sm_90 shared memory (227 KB)");

    static constexpr KernelDesc desc = {
        "wgmma_bf16_d512", "wideattn_wgmma_bf16_d512",
        kBF16, kBF16, kBF16,
        kHeadDim, kHeadDim, kHeadDim,
        kGroup, kGroup,
        kTileTokens, kTileKeys, kGroup, kThreads, kSmemBytes, 90,
        "varlen,paged,causal,gqa,lse,tma_kv", kKindPrefill};
};

}  // namespace wideattn
