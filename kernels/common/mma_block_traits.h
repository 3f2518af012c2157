// mma_block_traits.h - the compile-time block decomposition shared by the mma.sync prefill
// kernels for head dim 512 and GQA group 8 (mma_bf16_d512: kernels/mma/bf16_d512/traits.h;
// mma_e4m3_d512 and mma_e4m3q_d512: fp8/mma_e4m3_d512/traits.h), as a base of their traits
// structs.
//
// Block layout: 64 query rows = 8 tokens x the 8 query heads of one KV head, row
// r = token_in_tile * 8 + head_in_group. Eight warps: warp w owns the 16-row m-tile w / 2
// and the half w % 2 of the 512 dims (Q and O of that half live in its registers). The two
// warps of a pair add their partial scores through shared memory. The mma k extent, the key
// tile, the element type and the K/V ring are each kernel's own.
#pragma once

#include "kernels/common/kernel_desc.h"

namespace wideattn {

struct MmaD512BlockTraits {
    // Problem shape served.
    static constexpr int32_t kHeadDim = 512;
    static constexpr int32_t kGroup = 8;         // query heads per KV head = rows per token
    static constexpr int32_t kTileTokens = 8;    // query tokens per block
    static constexpr int32_t kRowsPerBlock = kTileTokens * kGroup;

    // mma.sync m16n8 tile of both products (the k extent kMmaK depends on the element type).
    static constexpr int32_t kMmaM = 16;
    static constexpr int32_t kMmaN = 8;
    static constexpr int32_t kAccumN = kMmaN;  // columns of one accumulator quad (epilogue.cuh)

    // Warp decomposition.
    static constexpr int32_t kWarpSize = 32;
    static constexpr int32_t kWarps = 8;
    static constexpr int32_t kThreads = kWarps * kWarpSize;
    static constexpr int32_t kDimSplit = 2;                        // warps sharing one m-tile
    static constexpr int32_t kDimsPerWarp = kHeadDim / kDimSplit;  // Q/O columns per warp
    static constexpr int32_t kRowTiles = kRowsPerBlock / kMmaM;    // m-tiles per block
    static constexpr int32_t kTokensPerRowTile = kMmaM / kGroup;   // tokens in one m-tile

    // K/V chunks in shared memory: 16-byte column index XOR (row % 8).
    static constexpr int32_t kSwizzleRows = 8;

    // Partial-score exchange: one fp32 16 x tile_keys tile per warp.
    static constexpr int32_t exchange_bytes(int32_t tile_keys) {
        return kWarps * kMmaM * tile_keys * static_cast<int32_t>(sizeof(float));
    }

    // The KernelDesc of a kernel of this decomposition (O is bf16 in every one of them).
    static constexpr KernelDesc prefill_desc(const char* name, const char* symbol, int32_t q_dtype,
                                             int32_t kv_dtype, int32_t tile_keys, int32_t smem_bytes,
                                             int32_t min_sm, const char* features,
                                             const char* split_symbol = nullptr) {
        return {name, symbol,
                q_dtype, kv_dtype, kBF16,
                kHeadDim, kHeadDim, kHeadDim,
                kGroup, kGroup,
                kTileTokens, tile_keys, kGroup, kThreads, smem_bytes, min_sm,
                features, kKindPrefill, split_symbol};
    }

    static_assert(kRowTiles * kDimSplit == kWarps, "one warp per (m-tile, dim half)");
    static_assert(kMmaM % kGroup == 0, "an m-tile holds whole tokens");
};

}  // namespace wideattn
