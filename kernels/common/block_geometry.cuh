// block_geometry.cuh - where a thread sits in an mma-tier prefill block (64 rows = 8 tokens x the
// 8 query heads of one KV head, warps = m-tile x dim half), which keys a block visits under
// bottom-right causal masking, the mask itself on a tile of scores, and the Q rows a lane loads.
// Shared by every prefill tier (the Hopper kernels use the key range and the mask), and the
// key range of one split under split-KV; `Traits`
// supplies kWarpSize, kDimSplit, kGroup, kTileKeys, kTokensPerRowTile and kDimsPerWarp.
#pragma once

#include <cstdint>

#include "kernels/common/causal_keys.cuh"
#include "kernels/common/split_range.h"
#include "kernels/common/tile_order.cuh"

namespace wideattn {

struct ThreadPlace {
    int32_t warp;
    int32_t lane;
    int32_t half;          // which half of the head dims the warp owns
    int32_t row_tile;      // which 16-row m-tile the warp owns
    int32_t head;          // query head of the thread's two rows
    int64_t first_token;   // q row of the tile's first token
};

// The keys the block visits.
struct BlockGeometry {
    int32_t num_tiles;       // key tiles to visit (causal: fully masked tiles are skipped)
    int32_t kv_end;          // keys [0, kv_end) are loaded
    int32_t row_key_end;     // keys [0, min(row_key_end + r, kv_end)) are visible to row r of the thread
    int32_t kv_head;
    int64_t table_offset;    // this sequence's row of block_table
};

template <class Traits>
__device__ __forceinline__ ThreadPlace thread_place(const BlockWork& work) {
    ThreadPlace place;
    place.warp = threadIdx.x / Traits::kWarpSize;
    place.lane = threadIdx.x % Traits::kWarpSize;
    place.half = place.warp % Traits::kDimSplit;
    place.row_tile = place.warp / Traits::kDimSplit;
    place.head = work.kv_head * Traits::kGroup + place.lane / 4;
    place.first_token = static_cast<int64_t>(work.tile.q_begin) + work.tile.tile_begin;
    return place;
}

// Split-KV (grid.z > 1, docs/design.md "Split-KV"), applied after block_geometry by a kernel's
// split instantiation: split blockIdx.z of gridDim.z visits the keys split_range gives it
// (split_range.h: whole granules of lcm(kTileKeys, block_size) keys, so a split starts on a page and
// a key tile boundary; rounded shares by default, the last split shorter or empty, or spread evenly
// with the build option split_ranges=even). The geometry is rebased to the split's first key
// (kv_end, row_key_end and the block-table row shift by it), so the main loops, page walks and
// masks run unchanged on local key numbers; a split without a key visits none (its rows end with
// LSE -inf). The boundaries depend on the shape alone.
// The key range of the block's split (blockIdx.z of gridDim.z) over kv_end visible keys.
template <class Traits>
__device__ __forceinline__ SplitRange block_split_range(const wideattn_prefill_params& p, int32_t kv_end) {
    return split_range(kv_end, split_granule(Traits::kTileKeys, p.block_size), blockIdx.z, gridDim.z);
}

// The geometry rebased to the split range `range` (block_split_range of its kv_end).
template <class Traits>
__device__ __forceinline__ void restrict_to_range(const wideattn_prefill_params& p, const SplitRange& range,
                                                  BlockGeometry* geometry) {
    geometry->kv_end = static_cast<int32_t>(range.end - range.begin);
    geometry->num_tiles = (geometry->kv_end + Traits::kTileKeys - 1) / Traits::kTileKeys;
    geometry->row_key_end -= static_cast<int32_t>(range.begin);
    geometry->table_offset += range.begin / p.block_size;
}

template <class Traits>
__device__ __forceinline__ void restrict_to_split(const wideattn_prefill_params& p, BlockGeometry* geometry) {
    restrict_to_range<Traits>(p, block_split_range<Traits>(p, geometry->kv_end), geometry);
}

template <class Traits>
__device__ __forceinline__ void block_geometry(const wideattn_prefill_params& p, const BlockWork& work,
                                               int32_t row_tile, BlockGeometry* geometry) {
    const TokenTile& tile = work.tile;
    const CausalKeys causal = causal_keys(p, tile);
    geometry->kv_end = causal.visible(tile.tile_len);
    geometry->num_tiles = (geometry->kv_end + Traits::kTileKeys - 1) / Traits::kTileKeys;
    // Unclamped end for the thread's first row; the mask clamps it with kv_end, which equals
    // the clamped end for every valid row (kv_end is the clamped end of the last token).
    geometry->row_key_end = static_cast<int32_t>(causal.context_end + row_tile * Traits::kTokensPerRowTile + 1);
    geometry->kv_head = work.kv_head;
    geometry->table_offset = static_cast<int64_t>(tile.seq) * p.block_table_stride;
}

// The work of a block in the head-slowest order (find_block_work_by_head) and the keys it visits
// (its split's under split-KV); false for a block past the last token tile, which has nothing to do.
template <class Traits, bool kSplit>
__device__ __forceinline__ bool head_order_block(const wideattn_prefill_params& p, BlockWork* work,
                                                 BlockGeometry* geometry) {
    *work = find_block_work_by_head(p, Traits::kTileTokens);
    if (!work->tile.found) return false;
    block_geometry<Traits>(p, *work, 0, geometry);
    if constexpr (kSplit) restrict_to_split<Traits>(p, geometry);
    return true;
}

// The index in its sequence of the block's local key 0: the split's first key under split-KV
// (restrict_to_split moves the block-table row by whole pages), 0 without (the RoPE position base
// of the kernels that rebuild K from V).
__device__ __forceinline__ int32_t first_key_position(const wideattn_prefill_params& p, const BlockWork& work,
                                                      const BlockGeometry& geometry) {
    const int64_t table_row = static_cast<int64_t>(work.tile.seq) * p.block_table_stride;
    return static_cast<int32_t>((geometry.table_offset - table_row) * p.block_size);
}

// The thread's two Q rows (row g and row g + 8 of its m-tile: tokens row_tile * kTokensPerRowTile
// + r), each at the lane's first A-fragment dim: half * kDimsPerWarp + kLaneDims * (lane % 4).
// Rows past the tile point at the last valid token (their results are discarded).
template <class Traits, int32_t kLaneDims, class Element>
__device__ __forceinline__ void lane_q_rows(const wideattn_prefill_params& p, int64_t first_token, int32_t tile_len,
                                            int32_t row_tile, int32_t head, int32_t half, int32_t lane,
                                            const Element* (&rows)[2]) {
    const Element* q_base = static_cast<const Element*>(p.q);
#pragma unroll
    for (int32_t r = 0; r < 2; ++r) {
        const int32_t token = min(row_tile * Traits::kTokensPerRowTile + r, tile_len - 1);
        rows[r] = q_base + (first_token + token) * p.q_token_stride + head * p.q_head_stride +
                  half * Traits::kDimsPerWarp + kLaneDims * (lane % 4);
    }
}

// Sets to -inf the scores of key tile `tile` that a thread's rows may not see (bottom-right
// causal limit and kv_end). s holds the thread's part of a 16-row x kTileKeys accumulator:
// s[n][e] is row (e / 2) * 8 of its pair, key n * kColsPerNTile + 2 * (lane % 4) + e % 2.
template <int32_t kTileKeys, int32_t kColsPerNTile, int32_t kNTiles>
__device__ __forceinline__ void mask_tile_scores(const BlockGeometry& g, int32_t tile, int32_t lane,
                                                 float (&s)[kNTiles][4]) {
    const int32_t tile_key0 = tile * kTileKeys;
    const int32_t warp_key_end = min(g.row_key_end, g.kv_end);  // smallest limit of the warp's rows
    if (tile_key0 + kTileKeys <= warp_key_end) return;
#pragma unroll
    for (int32_t n = 0; n < kNTiles; ++n)
#pragma unroll
        for (int32_t e = 0; e < 4; ++e) {
            const int32_t key = tile_key0 + n * kColsPerNTile + 2 * (lane % 4) + (e % 2);
            if (key >= min(g.row_key_end + e / 2, g.kv_end)) s[n][e] = -INFINITY;
        }
}

}  // namespace wideattn
