// mma_bf16_d512.cu - entry point of the BF16 mma.sync prefill kernel for head dim 512,
// GQA group 8 (traits: mma_traits.h; loop: mma_mainloop.cuh; output: mma_epilogue.cuh).
//
// Launch: grid.x = token_tile_count(total_q, num_seqs, kTileTokens), grid.y = num_q_heads / 8,
// block = kThreads, dynamic shared memory kSmemBytes. Each block computes 64 rows (8 tokens
// x the 8 query heads of one KV head) over every key they can see.
#include <cstdint>
#include <cuda_bf16.h>

#include "kernels/common/causal_keys.cuh"
#include "kernels/mma/mma_epilogue.cuh"
#include "kernels/mma/mma_mainloop.cuh"
#include "kernels/mma/mma_tile_order.cuh"
#include "kernels/mma/mma_traits.h"

extern "C" __global__ void __launch_bounds__(wideattn::MmaBf16D512Traits::kThreads, 1)
wideattn_mma_bf16_d512(const __grid_constant__ wideattn_prefill_params p) {
    using namespace wideattn;
    using namespace wideattn::mma;
    extern __shared__ __align__(16) unsigned char smem[];

    const BlockWork work = find_block_work(p, Tr::kTileTokens);
    if (!work.tile.found) return;
    const TokenTile& tile = work.tile;

    const int32_t warp = threadIdx.x / Tr::kWarpSize;
    const int32_t lane = threadIdx.x % Tr::kWarpSize;
    const int32_t half = warp % Tr::kDimSplit;
    const int32_t row_tile = warp / Tr::kDimSplit;
    const int32_t head = work.kv_head * Tr::kGroup + lane / 4;  // query head of the thread's rows
    const int64_t first_token = static_cast<int64_t>(tile.q_begin) + tile.tile_begin;

    const CausalKeys causal = causal_keys(p, tile);
    BlockGeometry geometry;
    geometry.kv_end = causal.visible(tile.tile_len);
    geometry.num_tiles = (geometry.kv_end + Tr::kTileKeys - 1) / Tr::kTileKeys;
    // Unclamped end for the thread's first row; the mask clamps it with kv_end, which equals
    // the clamped end for every valid row (kv_end is the clamped end of the last token).
    geometry.row_key_end = static_cast<int32_t>(causal.context_end + row_tile * Tr::kTokensPerRowTile + 1);
    geometry.kv_head = work.kv_head;
    geometry.table_offset = static_cast<int64_t>(tile.seq) * p.block_table_stride;

    uint32_t q[Tr::kQkSteps][4];
    load_q_fragments(p, q, first_token, tile.tile_len, row_tile, head, half, lane);

    float o[Tr::kDimNTiles][4];
#pragma unroll
    for (int32_t n = 0; n < Tr::kDimNTiles; ++n)
#pragma unroll
        for (int32_t c = 0; c < 4; ++c) o[n][c] = 0.0f;
    RowState state{{-INFINITY, -INFINITY}, {0.0f, 0.0f}};

    attention_mainloop(p, geometry, q, o, state, smem);
    write_output(p, o, state, first_token, tile.tile_len, row_tile, head, half, lane);
}
