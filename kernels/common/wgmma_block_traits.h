// wgmma_block_traits.h - the compile-time block layout shared by the Hopper-tier prefill kernels
// for head dim 512 and GQA group 8 (wgmma_bf16_d512: kernels/hopper/bf16_d512/traits.h;
// wgmma_e4m3q_d512: fp8/hopper_e4m3q_d512/traits.h), as a base of their traits structs.
//
// Block layout: 64 query rows = 8 tokens x the 8 query heads of one KV head, row
// r = token_in_tile * 8 + head_in_group (the same rows as the mma tier, so the causal, paged and
// varlen logic and the epilogue are shared). Two warpgroups: warpgroup g owns dims
// [256 g, 256 g + 256) of Q, K, V and O. Operands live in shared memory in the 128-byte-swizzled
// layout wgmma reads; each step runs S = Q K^T for a 32-key tile (wgmma m64n32, both operands in
// shared memory), the two warpgroups add their partial scores through shared memory, and
// O += P V runs as wgmma m64n256k16 with 16-bit P from registers and 16-bit V from shared memory
// (MN-major). The element type of Q and K, the loads and the shared-memory plan are each
// kernel's own.
#pragma once

#include "kernels/common/kernel_desc.h"

namespace wideattn {

struct WgmmaD512BlockTraits {
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
    static constexpr int32_t kDimsPerWarp = kDimsPerGroup;  // of a row, in one warp's accumulator (epilogue.cuh)

    // wgmma shapes: m64 covers the block's 64 rows; a step is one 32-key tile (N of the score
    // wgmma); P V is k16 on 16-bit P and V.
    static constexpr int32_t kWgmmaM = 64;
    static constexpr int32_t kTileKeys = 32;
    static constexpr int32_t kPvK = 16;
    static constexpr int32_t kRowsPerWarp = 16;  // accumulator rows of one warp
    static constexpr int32_t kTokensPerRowTile = kRowsPerWarp / kGroup;
    static constexpr int32_t kPvSteps = kTileKeys / kPvK;  // P V wgmmas per step
    static constexpr int32_t kAccumN = 8;                  // columns per accumulator quad
    static constexpr int32_t kKeyNTiles = kTileKeys / kAccumN;
    static constexpr int32_t kDimNTiles = kDimsPerGroup / kAccumN;

    // Paging: block_size is a multiple of kPageSizeMultiple, so a key tile is loaded as 16-key
    // sub-tiles that each lie inside one page.
    static constexpr int32_t kPageKeys = kPageSizeMultiple;
    static constexpr int32_t kSubTiles = kTileKeys / kPageKeys;

    // 128-byte swizzle: an operand is stored as slabs of 128 bytes per row; inside a slab the
    // 16-byte column c of row r sits at column c ^ (r % 8); 8-row atoms are 1024 bytes. A score
    // wgmma steps 32 bytes along a row (k16 bf16 = k32 e4m3).
    static constexpr int32_t kVecBytes = 16;
    static constexpr int32_t kSwizzleBytes = 128;
    static constexpr int32_t kVecsPerSlabRow = kSwizzleBytes / kVecBytes;
    static constexpr int32_t kAtomRows = 8;
    static constexpr int32_t kAtomBytes = kAtomRows * kSwizzleBytes;
    static constexpr int32_t kScoreStepBytes = 32;
    static constexpr int32_t kStepsPerSlab = kSwizzleBytes / kScoreStepBytes;
    static constexpr int32_t kQSlabBytes = kRowsPerBlock * kSwizzleBytes;  // one slab of the Q tile
    static constexpr int32_t kChunkSlabBytes = kTileKeys * kSwizzleBytes;  // one slab of a K or V tile

    // The 16-bit V of P V (bf16, or fp16 converted from e4m3): 64 dims per slab.
    static constexpr int32_t kValueBytes = 2;
    static constexpr int32_t kValueVecElems = kVecBytes / kValueBytes;
    static constexpr int32_t kValueSlabDims = kSwizzleBytes / kValueBytes;
    static constexpr int32_t kValueSlabsPerGroup = kDimsPerGroup / kValueSlabDims;

    // Score exchange: double-buffered by step parity, one fp32 64 x kTileKeys tile per warpgroup.
    static constexpr int32_t kExchangeParities = 2;
    static constexpr int32_t kExchangeTileBytes = kRowsPerBlock * kTileKeys * 4;
    static constexpr int32_t kExchangeBytes = kExchangeParities * kWarpGroups * kExchangeTileBytes;
    static constexpr int32_t kSmemAlign = 1024;  // swizzle atoms must be 1024-byte aligned

    // setmaxnreg (the two-CTA kernels' producer and consumer warpgroups): a launch of `threads`
    // threads gives each the register file's share rounded down to the allocation granule, and the
    // registers the producer threads give up must cover what the consumer threads take.
    static constexpr int32_t kRegisterFile = 65536;
    static constexpr int32_t kRegisterGranule = 8;
    static constexpr bool reallocation_fits(int32_t threads, int32_t consumer_threads, uint32_t consumer_registers,
                                            int32_t producer_threads, uint32_t producer_registers) {
        const int64_t launch = kRegisterFile / threads / kRegisterGranule * kRegisterGranule;
        return int64_t{consumer_registers} * consumer_threads + int64_t{producer_registers} * producer_threads <=
               launch * threads;
    }

    static_assert(kRowsPerBlock == kWgmmaM, "one wgmma m64 covers the block's rows");
    static_assert(kRowsPerWarp % kGroup == 0, "a warp's accumulator rows hold whole tokens");
    static_assert(kTileKeys % kPageKeys == 0, "a key tile is whole 16-key sub-tiles");
    static_assert(kDimsPerGroup % kValueSlabDims == 0, "a warpgroup's 16-bit dims are whole 128-byte slabs");
    static_assert(kKeyNTiles % 2 == 0, "two score quads form one P fragment");
};

}  // namespace wideattn
